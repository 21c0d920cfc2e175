"""Example rule ``swap_multiply`` (docs/rules.md, "Writing a rule"): the mechanics of a rule move.

It swaps the operands of ``name = nl.multiply(a, b)`` when both are plain names. The
product is the same and so is the cost: the example shows the contract, not a speedup.
Load it with ``ACCELOPT_RULES_PATH=docs/examples/rules`` (a folder of rule modules);
``accelopt-host moves KERNEL.py`` then lists ``swap_multiply:<name>``.
"""
import ast

from accelopt.rules.base import Candidate
from accelopt.rules.walk import walk

NAME = "swap_multiply"  # the rule id: plan ids are "swap_multiply:<site>"
SUMMARY = "Swap the operands of name = nl.multiply(a, b) (an example: same result, same cost)."
EFFECT = "none: an example of the rule contract (the product and its cost are unchanged)"  # shown in every plan
GAIN = 0.0  # fraction of the relieved resources' busy time it removes (predicted_gain)


def candidates(src):
    """One Candidate per site where the preconditions hold; [] (or NotApplicable) elsewhere."""
    out = []
    for node in walk(src.tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        call = node.value
        if src.call_name(call) != "nl.multiply" or len(call.args) != 2 or call.keywords:
            continue
        a, b = call.args
        if not (isinstance(a, ast.Name) and isinstance(b, ast.Name)) or a.id == b.id:
            continue
        site = node.targets[0].id  # names, not line numbers: the site survives other edits
        out.append(Candidate(
            src, site, f"swap the operands of nl.multiply in {site!r}",
            # The edits are made when the plan is applied, on the source it is applied to.
            lambda a=a, b=b: [src.replace_node(a, b.id), src.replace_node(b, a.id)],
            params={"a": a.id, "b": b.id}, relieves={}, base=10.0))
    return out
