"""Chat templates for tests/chat/test_chat_templates.py beyond the ones in ../shared/tokenizers.

../shared/tokenizers holds the published tokenizer_config.json of Llama-3-8B (base), Qwen2.5,
TinyLlama-chat and Phi-3-mini; the Mistral v1 folder is the base model's and has no template.
Each entry here is put next to one of those tokenizer.json files (``base``) in a temporary
model directory, replacing the published config's chat_template, so transformers and specdec
render the same template. ``source`` says where the text comes from: "published" = the
chat_template of the named model's tokenizer_config.json as distributed (transcribed), "made" =
written for this test to exercise one feature of the family (not a released template).
``family`` is what specdec_chat_template_detect must return: "jinja" (the tokenizer's own template,
rendered by the interpreter) for every one of them now; ``force`` names a family whose built-in
template is rendered as well.
"""

LLAMA3_INSTRUCT = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)

LLAMA2_CHAT = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
    "{% set system_message = false %}{% endif %}{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}"
    "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"
)

# transformers' former built-in LlamaTokenizer default: like Llama-2-chat plus a branch that
# renders a later system message as its own <<SYS>> block.
LLAMA2_SYS_BRANCH = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}{% elif USE_DEFAULT_PROMPT == true and not '<<SYS>>' in messages[0]['content'] %}"
    "{% set loop_messages = messages %}{% set system_message = 'DEFAULT_SYSTEM_MESSAGE' %}"
    "{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
    "{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}"
    "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'system' %}"
    "{{ '<<SYS>>\\n' + content.strip() + '\\n<</SYS>>\\n\\n' }}{% elif message['role'] == 'assistant' %}"
    "{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"
)

MIXTRAL_8X22B_DEFAULT = (
    "{{bos_token}}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if message['role'] == 'user' %}{{ ' [INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' ' + message['content'] + ' ' + eos_token}}"
    "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}"
)

# Stand-in for the "tool_use" entry of the list (its published text is long): it is only
# here so that the list form must be resolved to its "default" entry, as transformers does.
TOOL_USE_STANDIN = (
    "{{bos_token}}{% for message in messages %}{% if message['role'] == 'user' %}"
    "{% if tools %}{{ '[AVAILABLE_TOOLS]' + tools|string + '[/AVAILABLE_TOOLS]' }}{% endif %}"
    "{{ '[INST]' + message['content'] + '[/INST]' }}{% else %}{{ message['content'] + eos_token }}{% endif %}{% endfor %}"
)

MIXTRAL_8X7B = (
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}"
    "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}"
)

MISTRAL_V03 = """{%- if messages[0]["role"] == "system" %}
    {%- set system_message = messages[0]["content"] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}
{%- set user_messages = loop_messages | selectattr("role", "equalto", "user") | list %}

{#- This block checks for alternating user/assistant messages, skipping tool calling messages #}
{%- set ns = namespace() %}
{%- set ns.index = 0 %}
{%- for message in loop_messages %}
    {%- if not (message.role == "tool" or message.role == "tool_results" or (message.tool_calls is defined and message.tool_calls is not none)) %}
        {%- if (message["role"] == "user") != (ns.index % 2 == 0) %}
            {{- raise_exception("After the optional system message, conversation roles must alternate user/assistant/user/assistant/...") }}
        {%- endif %}
        {%- set ns.index = ns.index + 1 %}
    {%- endif %}
{%- endfor %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message["role"] == "user" %}
        {%- if tools is not none and (message == user_messages[-1]) %}
            {{- "[AVAILABLE_TOOLS][" }}
            {%- for tool in tools %}
                {%- set tool = tool.function %}
                {{- '{"type": "function", "function": {' }}
                {%- for key, val in tool.items() if key != "return" %}
                    {%- if val is string %}
                        {{- '"' + key + '": "' + val + '"' }}
                    {%- else %}
                        {{- '"' + key + '": ' + val|tojson }}
                    {%- endif %}
                    {%- if not loop.last %}
                        {{- ", " }}
                    {%- endif %}
                {%- endfor %}
                {{- "}}" }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- else %}
                    {{- "]" }}
                {%- endif %}
            {%- endfor %}
            {{- "[/AVAILABLE_TOOLS]" }}
            {%- endif %}
        {%- if system_message is defined %}
            {{- "[INST]" + system_message + "\\n\\n" + message["content"] + "[/INST]" }}
        {%- else %}
            {{- "[INST]" + message["content"] + "[/INST]" }}
        {%- endif %}
    {%- elif (message.tool_calls is defined and message.tool_calls is not none) %}
        {{- "[TOOL_CALLS][" }}
        {%- for tool_call in message.tool_calls %}
            {%- set out = tool_call.function|tojson %}
            {{- out[:-1] }}
            {%- if not tool_call.id is defined or tool_call.id|length != 9 %}
                {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
            {%- endif %}
            {{- ', "id": "' + tool_call.id + '"}' }}
            {%- if not loop.last %}
                {{- ", " }}
            {%- else %}
                {{- "]" + eos_token }}
            {%- endif %}
        {%- endfor %}
    {%- elif message["role"] == "assistant" %}
        {{- message["content"] + eos_token}}
    {%- elif message["role"] == "tool_results" or message["role"] == "tool" %}
        {%- if message.content is defined and message.content.content is defined %}
            {%- set content = message.content.content %}
        {%- else %}
            {%- set content = message.content %}
        {%- endif %}
        {{- '[TOOL_RESULTS]{"content": ' + content|string + ", " }}
        {%- if not message.tool_call_id is defined or message.tool_call_id|length != 9 %}
            {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
        {%- endif %}
        {{- '"call_id": "' + message.tool_call_id + '"}[/TOOL_RESULTS]' }}
    {%- else %}
        {{- raise_exception("Only user and assistant roles are supported, with the exception of an initial optional system message!") }}
    {%- endif %}
{%- endfor %}
"""

# Mistral 2024-style revision: system message merged into the first user turn, roles checked
# inside the rendering loop (made, modelled on the v0.1/v0.2 revisions that added system support).
MISTRAL_SYS_FIRST = """{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- if loop.first and system_message is defined %}
            {{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}
        {%- else %}
            {{- ' [INST] ' + message['content'] + ' [/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' + message['content'] + eos_token}}
    {%- else %}
        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}
    {%- endif %}
{%- endfor %}
"""

# v0.3 with the system message in the last user turn only and trimmed assistant text (made).
MISTRAL_SYS_LAST = MISTRAL_V03.replace('{%- if system_message is defined %}',
                                       '{%- if loop.last and system_message is defined %}').replace(
    '{{- message["content"] + eos_token}}', '{{- " " + message["content"]|trim + eos_token}}')

CHATML_PLAIN = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

QWEN2 = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# ChatML with a BOS and trimmed contents (made; the shape of several community ChatML templates).
CHATML_BOS_TRIM = (
    "{{ bos_token }}{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] | trim"
    " + '<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

PHI3_GENERIC_ROLE = (
    "{{ bos_token }}{% for message in messages %}{{'<|' + message['role'] + '|>' + '\n' + message['content'] + '<|end|>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}"
)

PHI35 = (
    "{% for message in messages %}{% if message['role'] == 'system' and message['content'] %}"
    "{{'<|system|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}"
    "{{'<|user|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}"
    "{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}"
)

# Llama 3.1 style header (date line, tools): recognised as Llama-3 but refused (not reproduced).
LLAMA31_LIKE = (
    "{{- bos_token }}{%- if not date_string is defined %}{%- set date_string = \"26 Jul 2024\" %}{%- endif %}"
    "{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}{{- \"Cutting Knowledge Date: December 2023\\n\" }}"
    "{{- \"Today Date: \" + date_string + \"\\n\\n\" }}{{- \"<|eot_id|>\" }}"
    "{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}{%- endfor %}"
)

GEMMA_LIKE = (
    "{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + message['role'] + '\n' + message['content'] | trim + '<end_of_turn>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}"
)

FIXTURES = [
    dict(name="llama3-instruct", base="llama-3-8b", family="jinja", source="published: Meta-Llama-3-8B-Instruct",
         chat_template=LLAMA3_INSTRUCT),
    dict(name="llama2-chat", base="tinyllama-1.1b-chat-v1.0", family="jinja", source="published: Llama-2-7b-chat-hf",
         chat_template=LLAMA2_CHAT),
    dict(name="llama2-sys-branch", base="tinyllama-1.1b-chat-v1.0", family="jinja",
         source="published: transformers' former LlamaTokenizer default template", chat_template=LLAMA2_SYS_BRANCH),
    dict(name="mixtral-8x22b-instruct", base="mistral-v1-mixtral-8x22b", family="jinja",
         source="published 'default' entry of Mixtral-8x22B-Instruct-v0.1; 'tool_use' entry made",
         chat_template=[{"name": "default", "template": MIXTRAL_8X22B_DEFAULT},
                        {"name": "tool_use", "template": TOOL_USE_STANDIN}]),
    dict(name="mixtral-8x7b-instruct", base="mistral-v1-mixtral-8x22b", family="jinja",
         source="published: Mixtral-8x7B-Instruct-v0.1 (early revision)", chat_template=MIXTRAL_8X7B),
    dict(name="mistral-7b-v0.3", base="mistral-v1-mixtral-8x22b", family="jinja",
         source="published: Mistral-7B-Instruct-v0.3 (a 2024 revision)", chat_template=MISTRAL_V03),
    dict(name="mistral-sys-first", base="mistral-v1-mixtral-8x22b", family="jinja",
         source="made: 2024 Mistral revision style, system in the first user turn", chat_template=MISTRAL_SYS_FIRST),
    dict(name="mistral-sys-last", base="mistral-v1-mixtral-8x22b", family="jinja",
         source="made: v0.3 with the system message in the last user turn", chat_template=MISTRAL_SYS_LAST),
    dict(name="chatml-bos-trim", base="llama-3-8b", family="jinja", source="made: ChatML with BOS and trim",
         chat_template=CHATML_BOS_TRIM),
    dict(name="chatml-generic", base="qwen2.5-1.5b-instruct", family="jinja", source="published: generic ChatML",
         chat_template=CHATML_PLAIN),
    dict(name="qwen2", base="qwen2.5-1.5b-instruct", family="jinja", source="published: Qwen2-Instruct",
         chat_template=QWEN2),
    dict(name="phi3-generic-role", base="phi-3-mini", family="jinja", source="made: Phi-3 with bos_token and any role",
         chat_template=PHI3_GENERIC_ROLE),
    dict(name="phi3.5", base="phi-3-mini", family="jinja", source="published: Phi-3.5-mini-instruct", chat_template=PHI35),
    dict(name="llama31-like", base="llama-3-8b", family="jinja", source="made: Llama-3.1-style date header",
         chat_template=LLAMA31_LIKE, force="llama3"),
    dict(name="gemma-like", base="llama-3-8b", family="jinja", source="made: Gemma turn markers",
         chat_template=GEMMA_LIKE),
]
