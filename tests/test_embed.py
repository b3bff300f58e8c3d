"""Embeddings with the bundled all-MiniLM-L6-v2 (offline) and exact Faiss search."""
import numpy as np

from groundbench.embed import Embedder, EmbeddingCache, VectorIndex, chunk_text, embedder_from_settings, top_k_chunks


def test_bundled_model_offline_cache_and_search(isolated_settings, tmp_path):
    e = embedder_from_settings(isolated_settings)
    text = ("The Eiffel Tower is in Paris and was completed in 1889. " * 6 + "Mount Everest is the highest mountain on Earth. " * 8
            + "Vaccines train the immune system to recognise a pathogen. " * 8)
    chunks = chunk_text(text, 500)
    assert all(len(c.text) <= 500 for c in chunks) and len(chunks) >= 3
    hits = top_k_chunks(e, ["When was the Eiffel Tower finished?", "How do vaccines work?"], [c.text for c in chunks], k=2)
    assert "Eiffel" in chunks[hits[0][0][0]].text
    assert "Vaccines" in chunks[hits[1][0][0]].text
    assert hits[0][0][1] >= hits[0][1][1]  # best first
    # a second embedder with the same cache encodes nothing again
    e2 = embedder_from_settings(isolated_settings)
    v1, v2 = e.encode([c.text for c in chunks]), e2.encode([c.text for c in chunks])
    assert e2.stats["encoded"] == 0 and e2.stats["cache_hits"] == len(chunks)
    np.testing.assert_allclose(v1, v2, atol=1e-6)


def test_index_exact_inner_product():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 8)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    q = x[[3, 17]]
    scores, ids = VectorIndex(x).search(q, k=5)
    brute = np.argsort(-(q @ x.T), axis=1)[:, :5]
    np.testing.assert_array_equal(ids, brute)
    assert VectorIndex(np.zeros((0, 8), np.float32)).search(q, 5)[1].shape == (2, 0)


def test_multilingual_text_goes_through_the_same_path(isolated_settings):
    e = embedder_from_settings(isolated_settings)
    v = e.encode(["Вакцины не изменяют ДНК человека.", "Les vaccins ne modifient pas l'ADN.", ""])
    assert v.shape == (3, 384) and np.isfinite(v).all()
