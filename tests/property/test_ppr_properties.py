"""Our PPR (igraph prpack) equals networkx's pagerank to 1e-6 on random weighted multigraphs."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fixgraph.retrieval.ppr import personalized_pagerank


@st.composite
def graphs(draw: st.DrawFn) -> tuple[int, list[tuple[int, int, float]], list[float], float]:
    n = draw(st.integers(min_value=2, max_value=25))
    edges = draw(
        st.lists(
            st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), st.floats(0.1, 5.0)).filter(lambda e: e[0] != e[1]),
            max_size=60,
        )
    )  # parallel edges allowed, isolated nodes allowed
    reset = draw(st.lists(st.sampled_from([0.0, 0.0, 0.5, 1.0, 2.0]), min_size=n, max_size=n).filter(any))
    damping = draw(st.sampled_from([0.5, 0.85, 0.3]))
    return n, edges, reset, damping


@settings(max_examples=60, deadline=None)
@given(graphs())
def test_prpack_matches_networkx(case: tuple[int, list[tuple[int, int, float]], list[float], float]) -> None:
    import igraph as ig
    import networkx as nx

    n, edges, reset, damping = case
    g = ig.Graph(n=n, edges=[(a, b) for a, b, _ in edges], directed=False)
    g.es["weight"] = [w for _, _, w in edges]
    ours = personalized_pagerank(g, np.array(reset), damping)

    reference = nx.MultiGraph()
    reference.add_nodes_from(range(n))
    reference.add_weighted_edges_from(edges)
    personalization = {i: r for i, r in enumerate(reset)}
    # networkx sends a dangling (isolated) node's mass back along the personalisation vector, as prpack does
    theirs = nx.pagerank(
        reference, alpha=damping, personalization=personalization, weight="weight", tol=1e-13, max_iter=10000
    )
    assert np.allclose(ours, [theirs[i] for i in range(n)], atol=1e-6, rtol=0)
    assert abs(ours.sum() - 1.0) < 1e-9
