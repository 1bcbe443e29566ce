"""Dataset options as the Rust core takes them: the safetensors-spark connector's names, each
value as the text Spark's `.option()` would carry."""

import json


def option_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return json.dumps({k: list(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value)


def option_texts(options: dict) -> dict:
    return {k: option_text(v) for k, v in options.items() if v is not None}
