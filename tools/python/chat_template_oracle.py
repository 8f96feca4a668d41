"""HF transformers oracle for the chat template with tools: renders each conversation of
tests/tokenizer/data/chat_tool_cases.jsonl with `tokenizer.apply_chat_template(messages,
tools=..., tokenize=False, add_generation_prompt=..., enable_thinking=...)` under the real
Qwen3 template (shared/fixtures/qwen3-tokenizer) and the Qwen2.5-Instruct template
(tests/tokenizer/data/qwen2.5_chat_template.jinja), and writes the golden texts that
tests/tokenizer/chat_template_tools_test.cpp pins aspen's native rendering against.

Usage (run with scripts/setup's virtualenv python, which has transformers pinned):
  chat_template_oracle.py golden [cases.jsonl] [golden.jsonl]
      one JSON object {"case", "template", "text"} per case and template; defaults:
      tests/tokenizer/data/chat_tool_{cases,golden}.jsonl

Case fields: name, messages, tools (a list, or null for none), add_generation_prompt,
and enable_thinking (optional: absent means the template's default). The golden file is
generated once and checked in; rerun this after adding a case.

Exit status: 0 ok, 2 the oracle itself could not run.
"""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
QWEN3_DIR = ROOT.parent / "shared/fixtures/qwen3-tokenizer"
DATA = ROOT / "tests/tokenizer/data"


def dumps(value):
    # Compact, non-ASCII kept as UTF-8, like the other golden files (tokenizer_oracle.py).
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def render(tokenizer, template, case):
    kwargs = {}
    if "enable_thinking" in case:
        kwargs["enable_thinking"] = case["enable_thinking"]
    return tokenizer.apply_chat_template(
        case["messages"],
        tools=case.get("tools"),
        tokenize=False,
        add_generation_prompt=case["add_generation_prompt"],
        chat_template=template,
        **kwargs,
    )


def golden(args):
    from transformers import AutoTokenizer

    cases_path = Path(args[0]) if len(args) > 0 else DATA / "chat_tool_cases.jsonl"
    out_path = Path(args[1]) if len(args) > 1 else DATA / "chat_tool_golden.jsonl"
    tokenizer = AutoTokenizer.from_pretrained(str(QWEN3_DIR))
    templates = {
        "qwen3": tokenizer.chat_template,
        "qwen2.5": (DATA / "qwen2.5_chat_template.jinja").read_text(encoding="utf-8"),
    }
    lines = []
    for line in cases_path.read_text(encoding="utf-8").split("\n"):
        if not line:
            continue
        case = json.loads(line)
        for name, template in templates.items():
            text = render(tokenizer, template, case)
            lines.append(dumps({"case": case["name"], "template": name, "text": text}))
    out_path.write_bytes("".join(line + "\n" for line in lines).encode("utf-8"))
    print(f"wrote {len(lines)} lines to {out_path}", file=sys.stderr)
    return 0


def main(argv):
    if argv and argv[0] == "golden":
        return golden(argv[1:])
    print("usage: chat_template_oracle.py golden [cases.jsonl] [golden.jsonl]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Exception as error:  # a missing module, file or bad input: no verdict
        print(f"chat_template_oracle.py: {type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(2)
