"""Exact-arithmetic oracle for the calculator tool (src/aspen/agent/calculator_expression.h):
evaluates each expression with Python's own parser and operators over fractions.Fraction,
which is the calculator's language by definition: Python's precedence and integer
operators, with "/" exact. Every integer literal becomes a Fraction, so 7/2 is 7/2 and
-7//2 is -4, as the calculator promises.

Usage (scripts/setup's virtualenv python, or any Python 3.8+):
  calculator_oracle.py < expressions.txt
      one expression per line in; one line out per expression: str(value) ("7/2", "-4"),
      or "error: division by zero" for a ZeroDivisionError

Exit status: 0 ok, 2 the oracle itself could not run (or an expression it cannot read).
"""
import ast
import sys
from fractions import Fraction


class Literals(ast.NodeTransformer):
    def visit_Constant(self, node):
        if isinstance(node.value, bool) or not isinstance(node.value, int):
            raise ValueError(f"not an integer literal: {node.value!r}")
        call = ast.Call(ast.Name("Fraction", ast.Load()), [node], [])
        return ast.copy_location(call, node)


def evaluate(expression):
    tree = Literals().visit(ast.parse(expression, mode="eval"))
    code = compile(ast.fix_missing_locations(tree), "<expression>", "eval")
    try:
        return str(eval(code, {"Fraction": Fraction, "__builtins__": {}}))
    except ZeroDivisionError:
        return "error: division by zero"


def main():
    if hasattr(sys, "set_int_max_str_digits"):  # Python 3.11+ limits int <-> str to 4300 digits
        sys.set_int_max_str_digits(0)
    out = [evaluate(line) for line in sys.stdin.read().split("\n") if line.strip()]
    sys.stdout.write("".join(value + "\n" for value in out))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as error:  # a bad expression or a broken interpreter: no verdict
        print(f"calculator_oracle.py: {type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(2)
