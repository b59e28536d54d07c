# check_info.cmake — runs `specdec info` on a fixture written by test_checkpoint
# (Qwen2, vocab 48, hidden 32, 2 layers, 4 heads / 2 kv heads, BF16, tied) and checks
# every printed field; then checks that a broken directory exits 1 with the detail.
file(REMOVE_RECURSE ${DIR})
execute_process(COMMAND ${WRITER} --write ${DIR} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "writing the fixture failed: ${rc}")
endif()
execute_process(COMMAND ${SPECDEC} info -m ${DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "specdec info exited ${rc}")
endif()
# 2 layers x (2 norms 32 + q 32x32 + k,v 16x32 + q,k,v bias 32+16+16 + o 32x32 + 3 x 40x32) + embed 48x32 + norm 32
set(expect
  "architecture: +Qwen2ForCausalLM"
  "vocab_size: +48\n" "hidden_size: +32\n" "intermediate_size: +40\n" "layers: +2\n" "heads: +4\n"
  "kv_heads: +2\n" "head_dim: +8\n" "max_position_embeddings: +2048\n" "rope_theta: +10000\n"
  "rope_scaling: +none" "tie_word_embeddings: +true" "attention_bias: +true" "dtype: +BF16"
  "parameters: +15.65K \\(15648\\)" "bos_id: +1\n" "eos_ids: +2\n")
set(failed 0)
foreach(e ${expect})
  if(NOT out MATCHES "${e}")
    message(SEND_ERROR "output lacks /${e}/")
    math(EXPR failed "${failed} + 1")
  endif()
endforeach()
# A broken checkpoint: exit 1, status string and the file named.
file(WRITE ${DIR}/config.json "{\"architectures\": [\"GPT2LMHeadModel\"]}")
execute_process(COMMAND ${SPECDEC} info -m ${DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out2 ERROR_VARIABLE err2)
message("${err2}")
if(NOT rc EQUAL 1 OR NOT err2 MATCHES "SPECDEC_ERR_UNSUPPORTED" OR NOT err2 MATCHES "config.json"
   OR NOT err2 MATCHES "GPT2LMHeadModel")
  message(SEND_ERROR "broken checkpoint: exit ${rc}, stderr: ${err2}")
  math(EXPR failed "${failed} + 1")
endif()
list(LENGTH expect n)
math(EXPR passed "${n} + 1 - ${failed}")
message("${passed} passed, ${failed} failed")
if(failed)
  message(FATAL_ERROR "specdec info check failed")
endif()
file(REMOVE_RECURSE ${DIR})
