# nc_embed(OUT SYMBOL BASEDIR FILES): writes a C file defining
#   const nc_embedded_file SYMBOL[] = {{"rel/path", data, size}, ..., {0}};
# so kernels and Lua modules ship inside the binaries.
function(nc_embed out symbol basedir files)
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} -DSYMBOL=${symbol} -DBASEDIR=${basedir}
            "-DFILES=${files}" -P ${CMAKE_SOURCE_DIR}/cmake/EmbedRun.cmake
    DEPENDS ${files} ${CMAKE_SOURCE_DIR}/cmake/EmbedRun.cmake
    COMMENT "Embedding ${symbol}"
    VERBATIM)
endfunction()
