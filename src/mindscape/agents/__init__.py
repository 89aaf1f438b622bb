"""The QA graph's nodes, one per module, each made by a `make_<node>(deps)` factory."""

from mindscape.agents.evidence_fuse import make_evidence_fuse
from mindscape.agents.init_signature import make_init_signature
from mindscape.agents.refine import make_refine
from mindscape.agents.router import route_after_refine
from mindscape.agents.signature_update import make_signature_update
from mindscape.agents.tri_layer_retrieve import make_tri_layer_retrieve
from mindscape.agents.try_answer import make_try_answer

__all__ = [
    "make_evidence_fuse",
    "make_init_signature",
    "make_refine",
    "make_signature_update",
    "make_tri_layer_retrieve",
    "make_try_answer",
    "route_after_refine",
]
