/* The CPU thread pool (runtime/core/threads.c): parallel ops against double references at 1,
 * 2, 3 and 5 threads, two host threads running ops at once, a forked child running a parallel
 * op (an alarm turns a hang into a failure), and nc_set_num_threads / nc_get_num_threads with
 * NETCL_NUM_THREADS and OMP_NUM_THREADS (checked in child processes, which read them afresh). */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"
#include "linalg_ref.h"

/* matmul m x k @ k x n in float32 (the BLAS path cut into slabs, by rows or by columns) */
static double matmul_error(nc_device *dev, int64_t m, int64_t n, int64_t k) {
  double *a = ref_random(m * k), *b = ref_random(k * n), *want = calloc((size_t)(m * n), sizeof(double));
  for (int64_t i = 0; i < m; i++)
    for (int64_t p = 0; p < k; p++)
      for (int64_t j = 0; j < n; j++) want[i * n + j] += a[i * k + p] * b[p * n + j];
  int64_t sa[2] = {m, k}, sb[2] = {k, n};
  nc_tensor *ta = ref_tensor(dev, NC_FLOAT32, 2, sa, a), *tb = ref_tensor(dev, NC_FLOAT32, 2, sb, b), *c = NULL;
  double e = 1;
  if (nc_matmul(ta, tb, &c) == NC_OK) e = ref_tensor_error(c, want, m * n);
  nc_tensor_release(ta), nc_tensor_release(tb), nc_tensor_release(c);
  free(a), free(b), free(want);
  return e;
}

/* sum of 1M floats, and softmax over the rows of 600 x 1000. The sum's terms are positive: a sum
 * of signed uniforms cancels to a few hundred, whose float32 error relative to it passed 1e-5
 * (1.18e-5 once, under the sanitizer with two host threads, whose draws from ref_uniform's shared
 * state interleave), although the summation was right. */
static double sum_error(nc_device *dev) {
  const int64_t n = 1 << 20;
  double *x = ref_random(n), want = 0;
  for (int64_t i = 0; i < n; i++) want += x[i] = fabs(x[i]);
  nc_tensor *t = ref_tensor(dev, NC_FLOAT32, 1, &n, x), *s = NULL;
  double e = 1;
  if (nc_reduce(NC_OP_SUM, t, 0, NULL, false, NULL, &s) == NC_OK) e = ref_tensor_error(s, &want, 1);
  nc_tensor_release(t), nc_tensor_release(s);
  free(x);
  return e;
}

static double softmax_error(nc_device *dev) {
  const int64_t r = 600, c = 1000, shape[2] = {r, c};
  double *x = ref_random(r * c), *want = malloc(sizeof(double) * (size_t)(r * c));
  for (int64_t i = 0; i < r * c; i++) x[i] *= 8;
  for (int64_t i = 0; i < r; i++) {
    double mx = -INFINITY, s = 0;
    for (int64_t j = 0; j < c; j++) mx = fmax(mx, x[i * c + j]);
    for (int64_t j = 0; j < c; j++) s += want[i * c + j] = exp(x[i * c + j] - mx);
    for (int64_t j = 0; j < c; j++) want[i * c + j] /= s;
  }
  nc_tensor *t = ref_tensor(dev, NC_FLOAT32, 2, shape, x), *y = NULL;
  double e = 1;
  if (nc_softmax(NC_OP_SOFTMAX, t, 1, &y) == NC_OK) e = ref_tensor_error(y, want, r * c);
  nc_tensor_release(t), nc_tensor_release(y);
  free(x), free(want);
  return e;
}

static int ops_ok(nc_device *dev, const char *what) {
  double e[4] = {matmul_error(dev, 300, 200, 150), matmul_error(dev, 40, 700, 300), sum_error(dev),
                 softmax_error(dev)};
  static const char *names[4] = {"matmul 300x200x150", "matmul 40x700x300", "sum", "softmax"};
  int ok = 1;
  for (int i = 0; i < 4; i++)
    if (!(e[i] < 1e-5)) {
      fprintf(stderr, "%s: %s error %g\n", what, names[i], e[i]);
      ok = 0;
    }
  return ok;
}

static void test_thread_counts(nc_device *cpu) {
  static const int counts[] = {1, 2, 3, 5};
  for (int i = 0; i < 4; i++) {
    CHECK_OK(nc_set_num_threads(counts[i]));
    CHECK(nc_get_num_threads() == counts[i]);
    char what[32];
    snprintf(what, sizeof what, "%d threads", counts[i]);
    CHECK(ops_ok(cpu, what));
  }
}

static void *host_thread(void *arg) {
  int ok = 1;
  for (int i = 0; i < 3 && ok; i++) ok = ops_ok(arg, "two host threads");
  return (void *)(intptr_t)ok;
}

static void test_two_host_threads(nc_device *cpu) {
  CHECK_OK(nc_set_num_threads(2));
  pthread_t th[2];
  for (int i = 0; i < 2; i++) CHECK(pthread_create(&th[i], NULL, host_thread, cpu) == 0);
  for (int i = 0; i < 2; i++) {
    void *ok = NULL;
    pthread_join(th[i], &ok);
    CHECK(ok == (void *)1);
  }
}

/* The parent has run parallel ops (its workers exist); the child must run them on workers of its
 * own. */
static void test_fork(nc_device *cpu) {
  CHECK_OK(nc_set_num_threads(2));
  CHECK(ops_ok(cpu, "before fork"));
  pid_t pid = fork();
  if (pid == 0) {
    alarm(30);
    _exit(ops_ok(cpu, "forked child") && ops_ok(cpu, "forked child, again") ? 0 : 1);
  }
  int status = 0;
  CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
  if (WIFSIGNALED(status)) fprintf(stderr, "forked child: killed by signal %d (SIGALRM: hung)\n", WTERMSIG(status));
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(ops_ok(cpu, "parent after fork"));
}

/* The count a fresh process starts with under the given environment (NULL: unset). */
static int child_default(const char *self, const char *netcl, const char *omp) {
  int fd[2];
  if (pipe(fd) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fd[1], 1);
    close(fd[0]);
    netcl ? setenv("NETCL_NUM_THREADS", netcl, 1) : unsetenv("NETCL_NUM_THREADS");
    omp ? setenv("OMP_NUM_THREADS", omp, 1) : unsetenv("OMP_NUM_THREADS");
    execl(self, self, "--print-threads", (char *)NULL);
    _exit(127);
  }
  close(fd[1]);
  char buf[32] = {0};
  ssize_t got = read(fd[0], buf, sizeof buf - 1);
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return got > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? atoi(buf) : -1;
}

static void test_api(const char *self) {
  CHECK_ERR(nc_set_num_threads(0), NC_ERR_ARG, "thread count must be from 1 to 1024, got 0");
  CHECK_ERR(nc_set_num_threads(1025), NC_ERR_ARG, "got 1025");
  CHECK_OK(nc_set_num_threads(7));
  CHECK(nc_get_num_threads() == 7);
  cpu_set_t set;
  CHECK(sched_getaffinity(0, sizeof set, &set) == 0);
  CHECK(child_default(self, NULL, NULL) == CPU_COUNT(&set));
  CHECK(child_default(self, "3", NULL) == 3);
  CHECK(child_default(self, NULL, "5,2") == 5);
  CHECK(child_default(self, "3", "5") == 3);
  CHECK(child_default(self, "abc", "4") == 4); /* warns on stderr, then the next source */
  CHECK(child_default(self, "0", NULL) == CPU_COUNT(&set));
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--print-threads") == 0) {
    printf("%d\n", nc_get_num_threads());
    return 0;
  }
  CHECK_OK(nc_init());
  nc_device *cpu = nc_device_get(0);
  test_api(argv[0]);
  test_thread_counts(cpu);
  test_two_host_threads(cpu);
  test_fork(cpu);
  CHECK_DONE();
}
