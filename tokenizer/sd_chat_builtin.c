/* sd_chat_builtin.c — the reference template of each chat family name a caller can force
 * (specdec_chat_apply's template_name), rendered by the Jinja interpreter like any model's own
 * template. The texts are the published templates, copied byte for byte (data); the same texts
 * are in tests/chat/templates/ and tests/chat/test_jinja_templates.py checks that they match. */
#include <string.h>

#include "sd_chat_template.h"

static const struct {
    const char *name, *source, *text;
} sd_chat_builtins[] = {
    {"llama3", "Meta-Llama-3-8B-Instruct (tokenizer_config.json)",
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_he"
    "ader_id|>' + message['role'] + '<|end_header_id|>\n"
    "\n"
    "'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_toke"
    "n + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_head"
    "er_id|>assistant<|end_header_id|>\n"
    "\n"
    "' }}{% endif %}"},
    {"chatml", "the generic ChatML template of the transformers documentation",
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n"
    "' + message['content'] + '<|im_end|>' + '\n"
    "'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n"
    "' }}{% endif %}"},
    {"llama2", "Llama-2-7b-chat-hf (tokenizer_config.json)",
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_mess"
    "age = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message"
    " = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (lo"
    "op.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/"
    "assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content"
    " = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set c"
    "ontent = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST"
    "] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content."
    "strip() + ' ' + eos_token }}{% endif %}{% endfor %}"},
    {"mistral", "Mixtral-8x22B-Instruct-v0.1, the \"default\" entry (tokenizer_config.json)",
    "{{bos_token}}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 "
    "== 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...'"
    ") }}{% endif %}{% if message['role'] == 'user' %}{{ ' [INST] ' + message['content'] + ' [/INST]'"
    " }}{% elif message['role'] == 'assistant' %}{{ ' ' + message['content'] + ' ' + eos_token}}{% el"
    "se %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %"
    "}"},
    {"zephyr", "TinyLlama-1.1B-Chat-v1.0 (tokenizer_config.json)",
    "{% for message in messages %}\n"
    "{% if message['role'] == 'user' %}\n"
    "{{ '<|user|>\n"
    "' + message['content'] + eos_token }}\n"
    "{% elif message['role'] == 'system' %}\n"
    "{{ '<|system|>\n"
    "' + message['content'] + eos_token }}\n"
    "{% elif message['role'] == 'assistant' %}\n"
    "{{ '<|assistant|>\n"
    "'  + message['content'] + eos_token }}\n"
    "{% endif %}\n"
    "{% if loop.last and add_generation_prompt %}\n"
    "{{ '<|assistant|>' }}\n"
    "{% endif %}\n"
    "{% endfor %}"},
    {"phi3", "Phi-3-mini-4k-instruct (tokenizer_config.json)",
    "{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n"
    "' + message['content'] + '<|end|>\n"
    "'}}{% elif message['role'] == 'user' %}{{'<|user|>\n"
    "' + message['content'] + '<|end|>\n"
    "'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n"
    "' + message['content'] + '<|end|>\n"
    "'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n"
    "' }}{% else %}{{ eos_token }}{% endif %}"},
};

const char *sd_chat_builtin(const char *name) {
    for (size_t i = 0; i < sizeof sd_chat_builtins / sizeof sd_chat_builtins[0]; i++)
        if (!strcmp(sd_chat_builtins[i].name, name)) return sd_chat_builtins[i].text;
    return NULL;
}
