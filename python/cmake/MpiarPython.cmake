# Helpers of python/CMakeLists.txt: finding programs, probing the interpreter, and the tests.

# mpiar_python_which(out name): the full path of a program given by path or by name on PATH.
function(mpiar_python_which out name)
  if(IS_ABSOLUTE "${name}")
    if(EXISTS "${name}")
      set(${out} "${name}" PARENT_SCOPE)
    else()
      set(${out} "" PARENT_SCOPE)
    endif()
    return()
  endif()
  unset(_mpiar_which CACHE)
  find_program(_mpiar_which NAMES "${name}")
  set(${out} "${_mpiar_which}" PARENT_SCOPE)
  unset(_mpiar_which CACHE)
endfunction()

# mpiar_python_same_file(out a b): whether two paths name the same file (links resolved).
function(mpiar_python_same_file out a b)
  mpiar_python_which(a "${a}")
  mpiar_python_which(b "${b}")
  set(same FALSE)
  if(a AND b)
    get_filename_component(ra "${a}" REALPATH)
    get_filename_component(rb "${b}" REALPATH)
    if(ra STREQUAL rb)
      set(same TRUE)
    endif()
  endif()
  set(${out} ${same} PARENT_SCOPE)
endfunction()

# mpiar_python_probe(python skip_var include_var): can this interpreter build the extension
# (Python.h and mpi4py's C API)? Sets skip_var to the reason when it cannot.
function(mpiar_python_probe python skip_var include_var)
  set(${skip_var} "" PARENT_SCOPE)
  if(NOT EXISTS "${python}")
    set(${skip_var} "the interpreter ${python} does not exist (set MPIAR_PYTHON_EXECUTABLE)"
        PARENT_SCOPE)
    return()
  endif()
  string(CONCAT code "import os, sysconfig\n"
           "inc = sysconfig.get_paths()['include']\n"
           "if not os.path.exists(os.path.join(inc, 'Python.h')):\n"
           "    raise SystemExit('Python.h is missing in ' + inc + ' (Debian: python3-dev)')\n"
           "try:\n"
           "    import mpi4py\n"
           "except ImportError:\n"
           "    raise SystemExit('mpi4py is missing (Debian: python3-mpi4py)')\n"
           "print(mpi4py.get_include())\n")
  execute_process(COMMAND "${python}" -c "${code}" RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    set(${skip_var} "${python}: ${err}" PARENT_SCOPE)
    return()
  endif()
  set(${include_var} "${out}" PARENT_SCOPE)
endfunction()

# mpiar_python_mpiexec_flags(out mpiexec): Open MPI refuses root and oversubscription unless told.
function(mpiar_python_mpiexec_flags out mpiexec)
  set(flags "")
  if(mpiexec)
    execute_process(COMMAND "${mpiexec}" --version OUTPUT_VARIABLE v ERROR_VARIABLE v
                    RESULT_VARIABLE rc)
    if(v MATCHES "Open MPI|OpenRTE|open-mpi")
      set(flags "--oversubscribe,--allow-run-as-root")
    endif()
  endif()
  set(${out} "${flags}" PARENT_SCOPE)
endfunction()

# mpiar_python_test(NAME n NP np NEED mods TIMEOUT s [SCRIPT file] [MPIEXEC exe] ARGS args...)
# One CTest entry through tests/ctest_driver.sh, which reports SKIPPED (77) with the reason when
# the interpreter lacks a module of NEED or the launcher is missing.
function(mpiar_python_test)
  cmake_parse_arguments(T "" "NAME;NP;NEED;TIMEOUT;SCRIPT;MPIEXEC" "ARGS;ENV" ${ARGN})
  if(NOT T_MPIEXEC)
    set(T_MPIEXEC "${_mpiar_py_mpiexec}")
  endif()
  mpiar_python_mpiexec_flags(flags "${T_MPIEXEC}")
  set(cmd "${_mpiar_py_driver}" --python "${MPIAR_PYTHON_EXECUTABLE}" --mpiexec "${T_MPIEXEC}"
          "--flags=${flags}" --np ${T_NP} --pkg "${_mpiar_py_pkgroot}" --need "${T_NEED}")
  if(T_SCRIPT)
    list(APPEND cmd --script "${T_SCRIPT}")
  endif()
  add_test(NAME ${T_NAME} COMMAND ${cmd} -- ${T_ARGS})
  set_tests_properties(${T_NAME} PROPERTIES LABELS python TIMEOUT ${T_TIMEOUT} PROCESSORS ${T_NP}
                       SKIP_RETURN_CODE 77
                       ENVIRONMENT "OMP_NUM_THREADS=1;PYTHONDONTWRITEBYTECODE=1;${T_ENV}")
endfunction()

# mpiar_python_add_tests(SKIP reason)
# mpiar_python_add_tests(PKGROOT dir MPIEXEC exe MPICC cc LIBBUILD dir [MISMATCH_MPICC cc]
#                        [WRONG_MPIEXEC exe])
function(mpiar_python_add_tests)
  cmake_parse_arguments(A "" "SKIP;PKGROOT;MPIEXEC;MPICC;LIBBUILD;MISMATCH_MPICC;WRONG_MPIEXEC" ""
                        ${ARGN})
  set(src "${PROJECT_SOURCE_DIR}")
  set(tests "${src}/python/tests")
  set(_mpiar_py_driver "${tests}/ctest_driver.sh")
  set(_mpiar_py_mpiexec "${A_MPIEXEC}")
  set(_mpiar_py_pkgroot "${A_PKGROOT}")
  set(work "${CMAKE_CURRENT_BINARY_DIR}/test-work")
  file(MAKE_DIRECTORY "${work}")
  set(core numpy,mpi4py,pytest)
  set(withtorch numpy,mpi4py,pytest,torch)
  set(pytest -m pytest -q -x -p no:cacheprovider --color=no --rootdir "${tests}")
  set(core_files "${tests}/test_world.py" "${tests}/test_allreduce.py" "${tests}/test_errors.py"
                 "${tests}/test_kvstore.py" "${tests}/test_requests.py" "${tests}/test_rsag.py"
                 "${tests}/test_alloc.py")
  set(names python_np1 python_np2 python_np4 python_torch_np1 python_torch_np2 python_torch_np4
            python_train_np1 python_train_np2 python_train_np4 python_train_resume_np2
            python_pip_install python_schedules python_schedules_np8)
  if(A_SKIP)
    foreach(n ${names} python_import_mpi_mismatch python_import_c_library_path
              python_wrong_launcher python_interrupt_np2)
      add_test(NAME ${n} COMMAND "${_mpiar_py_driver}" --skip "${A_SKIP}")
      set_tests_properties(${n} PROPERTIES LABELS python TIMEOUT 10 SKIP_RETURN_CODE 77)
    endforeach()
    return()
  endif()

  foreach(np 1 2 4)
    mpiar_python_test(NAME python_np${np} NP ${np} NEED ${core} TIMEOUT 120
                      ARGS ${pytest} ${core_files})
    mpiar_python_test(NAME python_torch_np${np} NP ${np} NEED ${withtorch} TIMEOUT 120
                      ARGS ${pytest} "${tests}/test_world.py" "${tests}/test_torch.py")
  endforeach()

  # Schedule files written in Python (examples/schedules, docs/schedules.md): the API and the
  # examples verified through mpiar-sim --schedule at p = 2..8, then run under MPI at p = 2..8
  # (one launch of 8 ranks, a communicator of the first p ranks for each p).
  set(sched "${work}/schedules")
  if(MPIAR_BUILD_PERF)
    mpiar_python_test(NAME python_schedules NP 1 NEED numpy,mpi4py,pytest TIMEOUT 180
                      ENV "MPIAR_SIM=$<TARGET_FILE:mpiar-sim>;MPIAR_SCHEDULE_DIR=${sched}"
                      ARGS ${pytest} "${tests}/test_schedule.py")
    set_tests_properties(python_schedules PROPERTIES FIXTURES_SETUP python_schedule_files)
    mpiar_python_test(NAME python_schedules_np8 NP 8 NEED numpy,mpi4py TIMEOUT 180
                      ARGS "${tests}/run_schedules.py" "${sched}")
    set_tests_properties(python_schedules_np8 PROPERTIES FIXTURES_REQUIRED python_schedule_files)
  else()
    foreach(t python_schedules python_schedules_np8)
      mpiar_add_skipped_test(NAME ${t} LABELS python
                             REASON "mpiar-sim verifies the schedules and is one of the tools in perf/, not built (MPIAR_BUILD_PERF=OFF)")
    endforeach()
  endif()

  # The torch.distributed backend "mpiar": every collective against gloo, async works, errors,
  # new_group, DDP against gloo, the DDP hook, ZeroRedundancyOptimizer.
  foreach(np 1 2 4)
    mpiar_python_test(NAME python_dist_np${np} NP ${np} NEED ${withtorch} TIMEOUT 180
                      ARGS ${pytest} -W ignore::UserWarning "${tests}/test_world.py"
                           "${tests}/test_dist.py")
  endforeach()
  # examples/python/ddp_train.py, unchanged but for --backend: DDP on gloo writes the losses,
  # DDP on mpiar must print the same ones; the ZeRO variant likewise; with MPIAR_REPRODUCIBLE=1
  # two algorithms give the same bits on 4 ranks.
  set(ddp "${src}/examples/python/ddp_train.py")
  set(ddpref "${work}/ddp_gloo.txt")
  mpiar_python_test(NAME python_ddp_gloo_np2 NP 2 NEED numpy,mpi4py,torch TIMEOUT 120
                    ARGS "${ddp}" --backend gloo --steps 8 --write "${ddpref}"
                         --- "${ddp}" --backend gloo --steps 8 --zero --write "${ddpref}.zero")
  set_tests_properties(python_ddp_gloo_np2 PROPERTIES FIXTURES_SETUP python_ddp_reference)
  mpiar_python_test(NAME python_ddp_mpiar_np2 NP 2 NEED numpy,mpi4py,torch TIMEOUT 120
                    ARGS "${ddp}" --backend mpiar --steps 8 --compare "${ddpref}")
  mpiar_python_test(NAME python_ddp_zero_np2 NP 2 NEED numpy,mpi4py,torch TIMEOUT 120
                    ARGS "${ddp}" --backend mpiar --steps 8 --zero --compare "${ddpref}.zero")
  set_tests_properties(python_ddp_mpiar_np2 python_ddp_zero_np2 PROPERTIES
                       FIXTURES_REQUIRED python_ddp_reference)
  set(ddprep "${work}/ddp_reproducible.txt")
  mpiar_python_test(NAME python_ddp_reproducible_np4 NP 4 NEED numpy,mpi4py,torch TIMEOUT 180
                    ENV "MPIAR_REPRODUCIBLE=1"
                    ARGS "${ddp}" --backend mpiar --steps 3 --width 8 --algorithm ring
                         --write "${ddprep}" --- "${ddp}" --backend mpiar --steps 3 --width 8
                         --algorithm recursive_doubling
                         --compare "${ddprep}" --exact)

  # Training (examples/python/train_mlp.py): the 1-rank run writes the reference loss curve; 2
  # and 4 ranks with the same global batch must match it, with identical parameters everywhere.
  set(train "${src}/examples/python/train_mlp.py")
  set(ref "${work}/train_reference.txt")
  mpiar_python_test(NAME python_train_np1 NP 1 NEED numpy,mpi4py,torch TIMEOUT 120
                    ARGS "${train}" --expect-ranks 1 --write "${ref}")
  set_tests_properties(python_train_np1 PROPERTIES FIXTURES_SETUP python_train_reference)
  # The optimizer's gradient hooks start the averaging during the backward pass: one bucket for
  # this small model by default, four with 4 KiB buckets.
  set(train_np2_args "")
  set(train_np4_args --bucket-bytes 4096)
  foreach(np 2 4)
    mpiar_python_test(NAME python_train_np${np} NP ${np} NEED numpy,mpi4py,torch TIMEOUT 180
                      ARGS "${train}" --expect-ranks ${np} --compare "${ref}" ${train_np${np}_args})
    set_tests_properties(python_train_np${np} PROPERTIES FIXTURES_REQUIRED python_train_reference)
  endforeach()
  # Checkpoint and resume: stop half way and save, then a new job loads and finishes; the curve
  # of the resumed part must still match the reference.
  set(ckpt "${work}/train_resume.ckpt")
  mpiar_python_test(NAME python_train_resume_np2 NP 2 NEED numpy,mpi4py,torch TIMEOUT 180
                    ARGS "${train}" --expect-ranks 2 --stop-after 20 --checkpoint "${ckpt}"
                         --compare "${ref}" --- "${train}" --expect-ranks 2 --resume "${ckpt}"
                         --compare "${ref}")
  set_tests_properties(python_train_resume_np2 PROPERTIES FIXTURES_REQUIRED python_train_reference)

  # Ctrl-C (SIGINT) during a wait for a late rank: KeyboardInterrupt, the other rank told.
  mpiar_python_test(NAME python_interrupt_np2 NP 2 NEED numpy,mpi4py TIMEOUT 120
                    ARGS "${tests}/check_interrupt.py")

  # pip install --no-build-isolation of python/ against an installed libmpiar, then a 2-rank run.
  mpiar_python_test(NAME python_pip_install NP 2 NEED numpy,mpi4py,pip,setuptools TIMEOUT 300
                    SCRIPT "${tests}/check_pip_install.sh" ENV "CMAKE_COMMAND=${CMAKE_COMMAND}"
                    ARGS "${A_LIBBUILD}" "${src}/python" "${work}/pip" "${A_MPICC}")

  # The extension built against this build's own MPI (not mpi4py's) must refuse to import.
  if(A_MISMATCH_MPICC)
    mpiar_python_test(NAME python_import_mpi_mismatch NP 1 NEED mpi4py,setuptools TIMEOUT 300
                      SCRIPT "${tests}/check_mpi_mismatch.sh"
                      ARGS "${src}" "${PROJECT_BINARY_DIR}" "$<TARGET_FILE_DIR:mpiar>"
                           "${work}/mismatch"
                           "${A_MISMATCH_MPICC}")
  endif()
  # A C program's environment names the main build's libmpiar (built with this build's own MPI)
  # on LD_LIBRARY_PATH: the package must still load its own build and import.
  if(A_MISMATCH_MPICC)
    mpiar_python_test(NAME python_import_c_library_path NP 2 NEED numpy,mpi4py TIMEOUT 60
                      ENV "LD_LIBRARY_PATH=$<TARGET_FILE_DIR:mpiar>"
                      ARGS "${tests}/check_library_path.py")
  endif()
  # Launched by another MPI's mpiexec, every process is a singleton: the size check must fail.
  if(A_WRONG_MPIEXEC)
    # The exit code and the message are checked together (cmake/check_run.cmake), after the
    # driver's own checks, so that a missing module still reports a skip.
    mpiar_python_test(NAME python_wrong_launcher NP 2 NEED numpy,mpi4py TIMEOUT 60
                      MPIEXEC "${A_WRONG_MPIEXEC}" SCRIPT "${tests}/check_wrong_launcher.sh"
                      ENV "CMAKE_COMMAND=${CMAKE_COMMAND}"
                      ARGS "${PROJECT_SOURCE_DIR}/cmake/check_run.cmake" "${tests}/test_world.py")
  endif()
endfunction()
