# Stands in for the Python interpreter of the Python tests when configuring found none
# (tests/CMakeLists.txt): each such test fails with this message.
message(FATAL_ERROR "no Python 3 interpreter for the Python tests: run `bash tools/deps.sh --test` "
                    "(it creates build/venv) and configure again, or pass -DSPECDEC_PYTHON=/path/to/python3")
