"""gguf_fields.py — a GGUF file's metadata copied into a gguf-py writer (for the tools and tests that rewrite
a file with a change: tools/check_gguf_llama_cpp.py, tests/drafters/test_gguf_cli.py)."""
import gguf


def copy_fields(reader, writer, skip=()):
    """Every field of `reader` (gguf.GGUFReader) into `writer` (gguf.GGUFWriter) with its type, but the
    reader's own GGUF.* entries, general.architecture (the writer writes its own) and the keys in `skip`."""
    for f in reader.fields.values():
        if f.name.startswith("GGUF.") or f.name == "general.architecture" or f.name in skip:
            continue
        t = f.types[0]
        if t == gguf.GGUFValueType.STRING:
            writer.add_string(f.name, f.contents())
        elif t == gguf.GGUFValueType.ARRAY:
            writer.add_array(f.name, f.contents())
        else:
            writer.add_key_value(f.name, f.contents(), t)
