/* PTX directives for kernels built by NVIDIA's OpenCL driver.
 *
 * NVIDIA's driver compiles OpenCL C to PTX and hands that PTX, as the program's binary, to its
 * assembler, which allots registers as it sees fit: the large-tile GEMM took 187 registers a
 * work-item, so that one 256-item work-group filled a multiprocessor's register file and a
 * barrier left it idle. OpenCL has no launch-bounds attribute, and the driver ignores
 * -cl-nv-maxrregcount, but PTX has performance directives (.maxnreg, .minnctapersm) that the
 * assembler obeys. So a program whose kernels have a rule below is built from source, its PTX
 * gets the directives after each such kernel's parameter list, and the program is rebuilt from
 * that PTX (clCreateProgramWithBinary takes PTX on this driver); the binary cache then holds the
 * patched PTX. Other drivers' binaries are not PTX and are left alone, as is any program whose
 * patched rebuild fails (the unpatched build stays: slower, never wrong). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include "cl_backend.h"

typedef struct {
  const char *kernel;    /* the entry's name, or a prefix of names followed by '*' */
  const char *unless;    /* no rule when the build options contain this (NULL: always) */
  const char *directive; /* PTX text placed between the parameter list and the body */
} ptx_rule;

/* Measured on the H200 and the H100 (docs/performance.md, "GPU: GEMM and convolution" and the
 * tensor-core section: the tf32 and bf16 builds of the 128 x 128 kernels too). */
static const ptx_rule tuned[] = {
    {"gemm_fast_l_*", NULL, ".maxnreg 128"},
    {"gemm_bf16_*", "-DHB_BN=256", ".maxnreg 128"}, /* the 128 x 128 tile: two work-groups a multiprocessor */
    {"conv_fast_l", NULL, ".maxnreg 128"},
    {"conv_wgrad_fast_l", NULL, ".maxnreg 128"},
    {"flash_attention_fwd_tiled", NULL, ".maxnreg 128"},
    {"flash_attention_bwd_q_tiled", NULL, ".maxnreg 128"},
    {"flash_attention_bwd_kv_tiled", NULL, ".maxnreg 128"},
    /* the split (3xTF32) build only: 1.86 -> 1.76 ms; one tf32 product per product runs best
       uncapped (0.78 ms against 1.02) */
    {"flash_attention_bwd_q_mma", "-DNC_ATT_SPLIT=0", ".maxnreg 168"},
};

/* NETCL_PTX_RULES="kernel=directive;kernel!unless=directive;..." replaces the table: the tuning
 * hook behind the table's figures (an empty value: no rules). Read once. */
enum { ENV_RULES_MAX = 32 };
static ptx_rule env_rules[ENV_RULES_MAX];
static char env_text[1024];
static size_t env_count;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static void read_env(void) {
  const char *e = getenv("NETCL_PTX_RULES");
  if (!e) return;
  snprintf(env_text, sizeof env_text, "%s", e);
  env_count = 0;
  env_rules[ENV_RULES_MAX - 1].kernel = ""; /* marks "set" even when empty */
  for (char *save = NULL, *r = strtok_r(env_text, ";", &save); r && env_count < ENV_RULES_MAX - 1;
       r = strtok_r(NULL, ";", &save)) {
    char *eq = strchr(r, '=');
    if (!eq) continue;
    *eq = 0;
    char *bang = strchr(r, '!');
    if (bang) *bang = 0;
    env_rules[env_count++] = (ptx_rule){r, bang ? bang + 1 : NULL, eq + 1};
  }
}

static const ptx_rule *active(size_t *n) {
  pthread_once(&env_once, read_env);
  if (env_rules[ENV_RULES_MAX - 1].kernel) return *n = env_count, env_rules;
  return *n = sizeof tuned / sizeof tuned[0], tuned;
}

void nc_cl_ptx_rules_hash(struct XXH64_state_s *h) {
  size_t count;
  const ptx_rule *rules = active(&count);
  XXH64_update(h, &count, sizeof count);
  for (size_t i = 0; i < count; i++) {
    XXH64_update(h, rules[i].kernel, strlen(rules[i].kernel) + 1);
    if (rules[i].unless) XXH64_update(h, rules[i].unless, strlen(rules[i].unless) + 1);
    XXH64_update(h, rules[i].directive, strlen(rules[i].directive) + 1);
  }
}

/* The rule for entry name[0..nl) under options: the first whose kernel is the name, or a prefix
 * of it followed by '*' in the rule; NULL when none (or the one found is off under options). */
static const ptx_rule *rule_for(const ptx_rule *rules, size_t count, const char *name, size_t nl, const char *options) {
  for (size_t i = 0; i < count; i++) {
    const size_t kl = strlen(rules[i].kernel);
    const bool prefix = kl > 0 && rules[i].kernel[kl - 1] == '*';
    const bool match = prefix ? nl >= kl - 1 && memcmp(name, rules[i].kernel, kl - 1) == 0
                              : nl == kl && memcmp(name, rules[i].kernel, kl) == 0;
    if (!match) continue;
    if (rules[i].unless && options && strstr(options, rules[i].unless)) return NULL;
    return &rules[i];
  }
  return NULL;
}

char *nc_cl_ptx_patch(const char *ptx, size_t len, const char *options, size_t *out_len) {
  if (len < 16 || !memmem(ptx, len, ".version ", 9) || !memmem(ptx, len, ".target ", 8)) return NULL;
  size_t count, entries = 0, longest = 0;
  const ptx_rule *rules = active(&count);
  for (size_t i = 0; i < count; i++)
    if (strlen(rules[i].directive) > longest) longest = strlen(rules[i].directive);
  for (const char *p = ptx; (p = memmem(p, len - (size_t)(p - ptx), ".entry ", 7)); p += 7) entries++;
  char *out = malloc(len + entries * (longest + 1) + 1);
  if (!out) return NULL;
  size_t n = 0, from = 0;
  bool any = false;
  /* each ".entry name(" in turn: copy up to the '{' after its parameter list, then the directive */
  for (const char *p = ptx; (p = memmem(p, len - (size_t)(p - ptx), ".entry ", 7)); p += 7) {
    const char *name = p + 7, *paren = memchr(name, '(', len - (size_t)(name - ptx));
    if (!paren) break;
    const ptx_rule *r = rule_for(rules, count, name, (size_t)(paren - name), options);
    const char *close = memchr(paren, ')', len - (size_t)(paren - ptx));
    const char *body = close ? memchr(close, '{', len - (size_t)(close - ptx)) : NULL;
    if (!r || !body) continue;
    const size_t at = (size_t)(body - ptx), dl = strlen(r->directive);
    memcpy(out + n, ptx + from, at - from);
    n += at - from;
    memcpy(out + n, r->directive, dl);
    out[n + dl] = '\n';
    n += dl + 1;
    from = at;
    any = true;
  }
  if (!any) {
    free(out);
    return NULL;
  }
  memcpy(out + n, ptx + from, len - from);
  *out_len = n + len - from;
  return out;
}

cl_program nc_cl_ptx_directives(nc_cl_device *cd, cl_program prog, const char *options) {
  size_t blen = 0, len = 0;
  unsigned char *bin = nc_cl_program_binary(cd, prog, &blen);
  char *ptx = bin ? nc_cl_ptx_patch((const char *)bin, blen, options, &len) : NULL;
  cl_program out = prog;
  if (ptx) {
    cl_int err, status;
    const unsigned char *b = (const unsigned char *)ptx;
    cl_program p2 = nc_cl.clCreateProgramWithBinary(cd->ctx, 1, &cd->id, &len, &b, &status, &err);
    if (err == CL_SUCCESS && status == CL_SUCCESS && nc_cl.clBuildProgram(p2, 1, &cd->id, options, NULL, NULL) == CL_SUCCESS) {
      nc_cl.clReleaseProgram(prog);
      out = p2;
    } else if (err == CL_SUCCESS) {
      nc_cl.clReleaseProgram(p2);
    }
  }
  free(ptx);
  free(bin);
  return out;
}
