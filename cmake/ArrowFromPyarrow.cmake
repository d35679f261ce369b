# Apache Arrow C++ and Parquet as PyPI's pyarrow wheel ships them (headers and shared
# libraries inside the package), since Debian 12 does not package Arrow. Defines the imported
# targets lathe::arrow and lathe::parquet, and installs both libraries into
# PREFIX/lib/lathe (`cmake --install`), where the installed binary finds them (src/cli).
#
# The Python interpreter is LATHE_PYTHON when set, else the lab's virtual environment
# (tools/setup.sh --python makes it at ~/.cache/lathe/venv), else python3 on PATH.
set(_default_venv "$ENV{HOME}/.cache/lathe/venv")
if(DEFINED ENV{LATHE_VENV})
  set(_default_venv "$ENV{LATHE_VENV}")
endif()
if(NOT LATHE_PYTHON)
  if(EXISTS "${_default_venv}/bin/python")
    set(LATHE_PYTHON "${_default_venv}/bin/python")
  else()
    find_program(LATHE_PYTHON python3)
  endif()
endif()
set(LATHE_PYTHON "${LATHE_PYTHON}" CACHE FILEPATH "Python with pyarrow, for Arrow C++")

execute_process(
  COMMAND "${LATHE_PYTHON}" -c
    "import pyarrow as pa; print(pa.get_include()); print(pa.get_library_dirs()[0]); print(pa.__version__)"
  OUTPUT_VARIABLE _pa_out ERROR_VARIABLE _pa_err RESULT_VARIABLE _pa_rc
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _pa_rc EQUAL 0)
  message(FATAL_ERROR "lathe's lab writes Parquet with Apache Arrow C++, taken from the pyarrow "
    "wheel, but ${LATHE_PYTHON} cannot import pyarrow. Run tools/setup.sh --python (it installs "
    "pyarrow into ~/.cache/lathe/venv), or pass -DLATHE_PYTHON=/path/to/python-with-pyarrow.")
endif()
string(REPLACE "\n" ";" _pa_lines "${_pa_out}")
list(GET _pa_lines 0 ARROW_INCLUDE_DIR)
list(GET _pa_lines 1 ARROW_LIB_DIR)
list(GET _pa_lines 2 ARROW_PYARROW_VERSION)

function(_lathe_arrow_lib target stem)
  file(GLOB _candidates "${ARROW_LIB_DIR}/lib${stem}.so.*")
  list(FILTER _candidates EXCLUDE REGEX "\\.so\\.[0-9]+\\.[0-9]")  # the soname link only
  if(NOT _candidates)
    message(FATAL_ERROR "pyarrow ${ARROW_PYARROW_VERSION} at ${ARROW_LIB_DIR} has no lib${stem}.so.*")
  endif()
  list(GET _candidates 0 _lib)
  add_library(${target} SHARED IMPORTED GLOBAL)
  set_target_properties(${target} PROPERTIES IMPORTED_LOCATION "${_lib}"
    INTERFACE_INCLUDE_DIRECTORIES "${ARROW_INCLUDE_DIR}")
  # Under its soname (the name the binary asks for), the file itself should it be a link.
  file(REAL_PATH "${_lib}" _file)
  get_filename_component(_soname "${_lib}" NAME)
  install(FILES "${_file}" DESTINATION lib/lathe RENAME "${_soname}")
endfunction()
_lathe_arrow_lib(lathe::arrow arrow)
_lathe_arrow_lib(lathe::parquet parquet)
set_property(TARGET lathe::parquet PROPERTY INTERFACE_LINK_LIBRARIES lathe::arrow)
message(STATUS "Arrow C++ from pyarrow ${ARROW_PYARROW_VERSION}: ${ARROW_LIB_DIR}")
