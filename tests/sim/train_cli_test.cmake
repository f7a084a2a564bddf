# mpiar-sim --train: the table and its JSON, a model file, the parameter-server rows, and the
# hand-computed step of tests/sim/test_train.c through the command line.
function(run expect_rc)
  execute_process(COMMAND ${SIM} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL expect_rc)
    message(FATAL_ERROR "mpiar-sim ${ARGN}: exit ${rc}, expected ${expect_rc}\n${out}\n${err}")
  endif()
  set(OUT "${out}" PARENT_SCOPE)
endfunction()

# The two-layer model on two nodes with recursive doubling: 33.6 ms (test_train.c's header);
# 1e-6 s per byte between nodes is a link of 0.008 Gb/s.
run(0 --train ${FILES}/two_layers.model --node-counts 1,2 --ppn 1 --batch 2 --node-tflops 1
    --link-gbps 0.008 --alpha-inter 1e-3 --gamma 1e-7 --fusion 0 --algorithm recursive_doubling)
if(NOT OUT MATCHES "\n +0.008 +1 +0 +2 +2 +33.60 +18.00 +19.60 +15.60 +53.6% +2  recursive_doubling x2\n")
  message(FATAL_ERROR "two-layer step: ${OUT}")
endif()

# VGG-16: JSON rows, efficiency 1 on one node and below it on eight, the step no shorter than the
# backward pass, no negative exposed time; a parameter server of 8 servers beside it.
run(0 --train vgg16 --node-counts 1,8 --ppn 2 --node-tflops 2 --link-gbps 10 --ps-servers 8
    --alpha-inter 5e-6 --json)
string(JSON n LENGTH "${OUT}")
if(NOT n EQUAL 3)
  message(FATAL_ERROR "expected 3 rows (1 node, 8 nodes, 8 nodes with servers): ${OUT}")
endif()
math(EXPR last "${n} - 1")
foreach(i RANGE ${last})
  foreach(f nodes efficiency step_s forward_s backward_s exposed_s messages ps_servers)
    string(JSON v_${f} GET "${OUT}" ${i} ${f})
  endforeach()
  if(v_nodes EQUAL 1 AND NOT v_efficiency EQUAL 1)
    message(FATAL_ERROR "row ${i}: one node at efficiency ${v_efficiency}")
  endif()
  if(v_nodes EQUAL 8 AND NOT (v_efficiency LESS 1 AND v_efficiency GREATER 0.5))
    message(FATAL_ERROR "row ${i}: eight nodes at efficiency ${v_efficiency}")
  endif()
  if(v_exposed_s LESS 0 OR v_step_s LESS v_backward_s OR NOT v_messages GREATER 0)
    message(FATAL_ERROR "row ${i}: step ${v_step_s}, backward ${v_backward_s}, exposed "
                        "${v_exposed_s}, messages ${v_messages}")
  endif()
endforeach()
string(JSON ps GET "${OUT}" 2 ps_servers)
string(JSON msg GET "${OUT}" 2 communication)
if(NOT ps EQUAL 8 OR NOT msg MATCHES "parameter server, 8 servers")
  message(FATAL_ERROR "parameter-server row: ${OUT}")
endif()

# The text table: one row per node count, the model's header.
run(0 --train resnet50 --node-counts 1,2 --ppn 4 --link-gbps 25,100)
if(NOT OUT MATCHES "161 tensors, 25.56 M parameters" OR NOT OUT MATCHES "\n +100 +1 +64 +2 +8 ")
  message(FATAL_ERROR "text table: ${OUT}")
endif()
