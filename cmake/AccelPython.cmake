# The embedded interpreter: the Python whose libpython, NumPy and packages
# (the Neuron SDK on a Trainium instance) the host imports in-process.
#
# -DACCEL_PYTHON=/path/to/python3 picks it, e.g. a Neuron virtual
# environment's bin/python3 (docs/trainium.md). Unset, it is the active
# virtual environment's python3 ($VIRTUAL_ENV) if there is one, else the
# system's /usr/bin/python3. Never the first python3 on PATH: a pyenv Python
# without NumPy comes first on some machines and FindPython would link the
# wrong libpython (docs/architecture.md).
set(ACCEL_PYTHON "" CACHE FILEPATH "Interpreter whose libpython and NumPy are embedded (default: $VIRTUAL_ENV/bin/python3, else /usr/bin/python3)")
if(ACCEL_PYTHON STREQUAL "")
  if(DEFINED ENV{VIRTUAL_ENV} AND EXISTS "$ENV{VIRTUAL_ENV}/bin/python3")
    set(ACCEL_PYTHON "$ENV{VIRTUAL_ENV}/bin/python3" CACHE FILEPATH "" FORCE)
  else()
    set(ACCEL_PYTHON "/usr/bin/python3" CACHE FILEPATH "" FORCE)
  endif()
endif()
if(NOT EXISTS "${ACCEL_PYTHON}")
  message(FATAL_ERROR "${ACCEL_PYTHON} is missing: give -DACCEL_PYTHON=/path/to/python3 (with NumPy and its -dev headers; on Debian run scripts/setup.sh)")
endif()
message(STATUS "Embedded Python: ${ACCEL_PYTHON}")
set(Python_EXECUTABLE "${ACCEL_PYTHON}" CACHE FILEPATH "" FORCE)
set(PYBIND11_FINDPYTHON ON)
find_package(Python 3.10 REQUIRED COMPONENTS Interpreter Development.Embed NumPy)
find_package(pybind11 2.10 CONFIG REQUIRED)
