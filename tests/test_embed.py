"""Embeddings with the bundled all-MiniLM-L6-v2 (offline) and exact Faiss search."""
import numpy as np

from groundbench.embed import VectorIndex, chunk_text, embedder_from_settings, top_k_chunks


def test_bundled_model_offline_cache_and_search(isolated_settings, tmp_path):
    e = embedder_from_settings(isolated_settings)
    text = ("The Eiffel Tower is in Paris and was completed in 1889. " * 6
            + "Mount Everest is the highest mountain on Earth. " * 8
            + "Vaccines train the immune system to recognise a pathogen. " * 8)
    chunks = chunk_text(text, 500)
    assert all(len(c.text) <= 500 for c in chunks) and len(chunks) >= 3
    hits = top_k_chunks(e, ["When was the Eiffel Tower finished?", "How do vaccines work?"], [c.text for c in chunks],
                        k=2)
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


POLISH = ["Muzeum Powstania Warszawskiego działa normalnie; miasto nie podniosło mu czynszu, a informacja o zamknięciu "
          "jest fałszywa.",
          "Prognoza pogody dla Krakowa: w weekend deszcz i silny wiatr, temperatura do 12 stopni.",
          "The Eiffel Tower in Paris was completed in 1889 for the World's Fair.",
          "Vaccines train the immune system to recognise a pathogen before an infection.",
          "Mount Kenya milk was tested by the Kenya Bureau of Standards in April 2025."]


def test_non_english_unit_retrieves_its_own_language_evidence(isolated_settings):
    """The seed study's Local claims are about places in other languages (claim L1: the Warsaw Rising Museum). With the
    configured embedder (here the bundled all-MiniLM-L6-v2), a Polish unit retrieves the Polish chunk that addresses it,
    well ahead of a Polish chunk on another subject. The bundled model is English-only: it manages this same-language
    case through shared word pieces, but across languages (an English unit, Polish evidence) it barely separates the
    right chunk from unrelated ones, which is why real runs use the multilingual GTE and a real judge refuses MiniLM
    (README)."""
    e = embedder_from_settings(isolated_settings)
    claims = ["Prezydent Warszawy podniósł czynsz Muzeum Powstania Warszawskiego, które zostało zamknięte.",
              "The mayor of Warsaw raised the rent of the Warsaw Rising Museum, which had to close."]
    same, cross = top_k_chunks(e, claims, POLISH, k=3)
    assert same[0][0] == 0 and same[0][1] - same[1][1] > 0.2, same
    if e.model_name == "all-MiniLM-L6-v2":  # the bundled model across languages: right chunk first, but by a hair
        assert cross[0][1] - cross[1][1] < 0.1, cross
