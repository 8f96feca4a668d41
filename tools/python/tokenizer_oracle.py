"""HF tokenizers oracle for the tokenizer tests: the Rust `tokenizers` crate through its
PyPI binding (pinned in tools/python/requirements.txt). It produces the golden ids the
C++ tokenizer is pinned against and checks what aspen's BPE trainer produces.

Usage (run with scripts/setup's virtualenv python; TOKENIZER is a tokenizer.json path,
or `-json <text>` for tokenizer.json content, default: the real Qwen3 tokenizer.json in
shared/fixtures/qwen3-tokenizer beside the clone):
  tokenizer_oracle.py golden [TOKENIZER] [corpus.jsonl] [golden.jsonl]
      one JSON id array per corpus line (encode, add_special_tokens=False); defaults:
      tests/tokenizer/data/{corpus,qwen3_golden}.jsonl
  tokenizer_oracle.py encode [TOKENIZER]   < one JSON string per line
  tokenizer_oracle.py decode [TOKENIZER]   < one JSON [ids, skip_special_tokens] per line
      print one JSON value per input line (the ids, or the decoded string)
  tokenizer_oracle.py check <tokenizer.json> <cases.jsonl>
      each case is {"text": ..., "ids": [...]} (aspen's ids); prints one line per text
      HF encodes differently and exits 1 if any, else prints "ok <n>"
  tokenizer_oracle.py train <skeleton.json> <corpus.txt> <out.json>
      trains the skeleton's BPE model with HF's default BpeTrainer on the lines of
      corpus.txt (HF keeps each line's "\\n") and saves the result to out.json

Exit status: 0 ok, 1 mismatches (check), 2 the oracle itself could not run.
"""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TOKENIZER = ROOT.parent / "shared/fixtures/qwen3-tokenizer/tokenizer.json"
DATA = ROOT / "tests/tokenizer/data"


def dumps(value):
    # Compact, non-ASCII kept as UTF-8: byte for byte what `aspen tokenize` prints
    # (nlohmann dump), which the CLI test compares with, and the committed golden file.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def read_lines(text):
    # Split on "\n" only: str.splitlines() would also split inside lines at U+2028,
    # U+0085 and friends, which the corpus contains on purpose.
    return [line for line in text.split("\n") if line]


def stdin_lines():
    return read_lines(sys.stdin.buffer.read().decode("utf-8"))


def write(text):
    sys.stdout.buffer.write(text.encode("utf-8"))


def load(args):
    """The tokenizer the first of `args` names (consumed); absent or "": the Qwen3 one."""
    from tokenizers import Tokenizer

    if args and args[0] == "-json":
        args.pop(0)
        return Tokenizer.from_str(args.pop(0))
    return Tokenizer.from_file((args.pop(0) if args else "") or str(DEFAULT_TOKENIZER))


def encode(tokenizer, text):
    return tokenizer.encode(text, add_special_tokens=False).ids


def golden(args):
    tokenizer = load(args)
    corpus = args[0] if len(args) > 0 else DATA / "corpus.jsonl"
    out = args[1] if len(args) > 1 else DATA / "qwen3_golden.jsonl"
    texts = [json.loads(line) for line in read_lines(Path(corpus).read_text(encoding="utf-8"))]
    Path(out).write_bytes("".join(dumps(encode(tokenizer, t)) + "\n" for t in texts).encode())
    print(f"wrote {len(texts)} lines to {out}", file=sys.stderr)
    return 0


def encode_stdin(args):
    tokenizer = load(args)
    write("".join(dumps(encode(tokenizer, json.loads(line))) + "\n" for line in stdin_lines()))
    return 0


def decode_stdin(args):
    tokenizer = load(args)
    for line in stdin_lines():
        ids, *skip = json.loads(line)
        decoded = tokenizer.decode(ids, skip_special_tokens=bool(skip and skip[0]))
        write(dumps(decoded) + "\n")
    return 0


def check(tokenizer_path, cases_path):
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(tokenizer_path)
    cases = [json.loads(line) for line in read_lines(Path(cases_path).read_text(encoding="utf-8"))]
    mismatches = 0
    for i, case in enumerate(cases):
        hf = encode(tokenizer, case["text"])
        if hf != case["ids"]:
            mismatches += 1
            print(f"case {i} {dumps(case['text'])}: hf={dumps(hf)} aspen={dumps(case['ids'])}")
    if mismatches:
        print(f"{mismatches} of {len(cases)} cases differ")
        return 1
    print(f"ok {len(cases)}")
    return 0


def train(skeleton_path, corpus_path, out_path):
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(skeleton_path)
    # No trainer given: the model's own default, BpeTrainer::default() (vocab 30000,
    # min_frequency 0, no special tokens), as the test's merges were first checked with.
    # Training from a file reads it line by line and keeps each line's "\n"; the C++
    # test feeds aspen's trainer the same lines.
    tokenizer.train([corpus_path])
    tokenizer.save(out_path, pretty=True)
    return 0


def main(argv):
    mode, args = (argv[0], argv[1:]) if argv else ("", [])
    if mode == "golden":
        return golden(args)
    if mode == "encode":
        return encode_stdin(args)
    if mode == "decode":
        return decode_stdin(args)
    if mode == "check" and len(args) == 2:
        return check(*args)
    if mode == "train" and len(args) == 3:
        return train(*args)
    print("usage: tokenizer_oracle.py golden|encode|decode [TOKENIZER] ...\n"
          "       tokenizer_oracle.py check <tokenizer.json> <cases.jsonl>\n"
          "       tokenizer_oracle.py train <skeleton.json> <corpus.txt> <out.json>",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Exception as error:  # a missing module, file or bad input: no verdict
        print(f"tokenizer_oracle.py: {type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(2)
