"""``neuronxcc.nki.typing``: tensor annotations (nki-facts §2.7).

``nt.tensor[shape, dtype]`` and ``nt.mutable_tensor[...]`` are accepted as
annotations; a ``mutable_tensor`` parameter may be written by the kernel
(otherwise ``err_cannot_update_immutable_parameter``), and annotated shapes are
checked at call time (``err_annotation_shape_mismatch``).
"""


class Annotation:
    """Result of ``nt.tensor[...]``; ``shape`` (tuple or None), ``dtype`` and ``mutable``."""

    def __init__(self, mutable, shape=None, dtype=None):
        self.mutable, self.shape, self.dtype = mutable, shape, dtype

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        shape = tuple(k for k in key if isinstance(k, int)) or None
        if key and isinstance(key[0], (tuple, list)):
            shape = tuple(key[0])
        dtype = next((k for k in key if not isinstance(k, (int, tuple, list))), None)
        return Annotation(self.mutable, shape, dtype)

    def __repr__(self):
        kind = "mutable_tensor" if self.mutable else "tensor"
        return f"nt.{kind}[{self.shape}, {self.dtype}]"


tensor = Annotation(False)
mutable_tensor = Annotation(True)
scalar = object()
