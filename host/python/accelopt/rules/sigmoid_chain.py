"""Recognising sigmoid(x) = 1 / (1 + exp(-x)) through temps (shared by fuse_sigmoid and fuse_silu)."""
from . import patterns as P


def sigmoid_of_reciprocal(src, inl, node):
    """x if ``node`` is reciprocal(1 + exp(-x)) (each step inline or a temp), else None."""
    d = P.reciprocal_arg(src, node)
    if d is None:
        return None
    return exp_chain(src, inl, inl.look(d))


def exp_chain(src, inl, node):
    """x if ``node`` is 1 + exp(-x) (exp(-x) inline or a temp), else None."""
    e = P.one_plus_arg(src, node)
    if e is None:
        return None
    return P.neg_exp_arg(src, inl.look(e))


def sigmoid_arg(src, inl, node):
    """x if ``node`` (looked through one temp) is ``activation(op=nl.sigmoid, data=x)`` or
    reciprocal(1 + exp(-x)); else None."""
    node = inl.look(node)
    x = P.activation_of(src, node, "sigmoid")
    return x if x is not None else sigmoid_of_reciprocal(src, inl, node)
