# lathe_add_plugin(NAME SOURCES src... LIBS lib...): a plug-in (src/core/plugin.h), a
# shared library loaded with dlopen when first needed. Built into BUILD/lib/lathe, where the
# build tree's binaries find it; installed into PREFIX/lib/lathe beside the libraries it needs,
# found there through its RUNPATH. Every target that links lathe_core is built after it, so a
# binary never meets a plug-in from an older build (the loader would refuse it).
set(LATHE_PLUGIN_DIR ${CMAKE_BINARY_DIR}/lib/lathe)
function(lathe_add_plugin name)
  cmake_parse_arguments(M "" "" "SOURCES;LIBS" ${ARGN})
  add_library(${name} MODULE ${M_SOURCES})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src
    ${CMAKE_BINARY_DIR}/generated)
  target_link_libraries(${name} PRIVATE ${M_LIBS})
  add_dependencies(${name} lathe_version)
  # Only lathe_plugin is exported; the rest stays inside (RTLD_LOCAL loads it apart anyway).
  set_target_properties(${name} PROPERTIES
    LIBRARY_OUTPUT_DIRECTORY ${LATHE_PLUGIN_DIR}
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    INSTALL_RPATH "$ORIGIN")
  install(TARGETS ${name} LIBRARY DESTINATION lib/lathe)
  add_dependencies(lathe_core ${name})
endfunction()
