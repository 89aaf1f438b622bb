"""Golden snapshot of the QA graph's topology (what Studio draws).

Regenerate after an intended change with:
    MINDSCAPE_UPDATE_SNAPSHOTS=1 pytest tests/unit/test_graph_snapshot.py
"""

from __future__ import annotations

import os
from pathlib import Path

from mindscape.graphs.qa import NODES, build_qa_graph

SNAPSHOT = Path(__file__).resolve().parents[1] / "snapshots" / "qa_graph.mmd"


def test_mermaid_drawing_matches_snapshot() -> None:
    drawing = build_qa_graph().compile(name="mindscape").get_graph().draw_mermaid()
    if os.environ.get("MINDSCAPE_UPDATE_SNAPSHOTS"):
        SNAPSHOT.write_text(drawing)
    assert drawing == SNAPSHOT.read_text(), "graph topology changed; see the module docstring"


def test_graph_shape() -> None:
    compiled = build_qa_graph().compile()
    graph = compiled.get_graph()
    assert set(NODES) <= set(graph.nodes)
    edges = {(e.source, e.target, e.conditional) for e in graph.edges}
    assert ("refine", "tri_layer_retrieve", True) in edges
    assert ("refine", "__end__", True) in edges
    assert ("try_answer", "refine", False) in edges
    assert compiled.checkpointer is None
    schema = compiled.get_context_jsonschema()
    assert {"preset", "max_rounds", "alpha", "budgets"} <= set(schema["properties"])
    assert set(compiled.get_input_jsonschema()["properties"]) == {
        "question",
        "doc_id",
        "doc_ids",
        "task",
        "options",
    }
