# Writes OUT from IN (src/core/version.h.in) with the git commit of SOURCE_DIR as it is now,
# "-dirty" when the tree has uncommitted changes, "unknown" outside git. Run at every build
# (src/core/CMakeLists.txt), so a lab row never names a stale commit; configure_file leaves
# OUT untouched when nothing changed, so nothing is recompiled then.
execute_process(COMMAND git describe --always --dirty --abbrev=12
  WORKING_DIRECTORY ${SOURCE_DIR}
  OUTPUT_VARIABLE LATHE_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE git_rc)
if(NOT git_rc EQUAL 0 OR LATHE_COMMIT STREQUAL "")
  set(LATHE_COMMIT unknown)
endif()
configure_file(${IN} ${OUT} @ONLY)
