//! The vector-set HNSW index: Redis-exact numerics (golden values taken from Redis 8.2.3),
//! search quality, removal repair, filtering, determinism and snapshot robustness.

use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use store::types::vset::hnsw::{Hnsw, NodeId, Projection, Quant};

const QUANTS: [Quant; 3] = [Quant::F32, Quant::Q8, Quant::Bin];

fn random_vectors(n: usize, dim: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..n).map(|_| (0..dim).map(|_| rng.gen_range(-1.0f32..1.0)).collect()).collect()
}

fn build(quant: Quant, vectors: &[Vec<f32>], seed: u64) -> (Hnsw, Vec<NodeId>) {
    let mut h = Hnsw::new(vectors[0].len(), quant, 16, seed);
    let ids = vectors.iter().map(|v| h.insert(v, 200)).collect();
    (h, ids)
}

/// Tie-aware recall@k: a returned node counts if it is at least as similar as the exact k-th
/// (BIN has few distinct distances, so "which of the tied ones" is not a quality question).
fn recall(h: &Hnsw, queries: &[Vec<f32>], k: usize, ef: usize) -> f64 {
    let mut hits = 0usize;
    let mut total = 0usize;
    for q in queries {
        let q = h.query(q);
        let exact = h.search_exact(&q, k, None);
        let approx = h.search(&q, k, ef, None, 0);
        let kth = exact.last().unwrap().1;
        hits += approx.iter().filter(|r| r.1 >= kth).count();
        total += exact.len();
    }
    hits as f64 / total as f64
}

/// Every link points to a live node that links back at the same level.
fn assert_graph_consistent(h: &Hnsw) {
    for id in h.nodes() {
        let levels = h.links(id);
        assert_eq!(levels.len(), h.level(id) + 1);
        for (i, level) in levels.iter().enumerate() {
            let l = h.level(id) - i;
            for &(nb, _) in level {
                assert!(h.contains(nb), "{id} links to removed {nb}");
                assert!(h.level(nb) >= l);
                let back = &h.links(nb)[h.level(nb) - l];
                assert!(back.iter().any(|&(x, _)| x == id), "{id}->{nb} at level {l} not reciprocated");
            }
        }
    }
}

fn encoded(h: &Hnsw) -> Vec<u8> {
    let mut out = Vec::new();
    h.encode(&mut out);
    out
}

// ---------------------------------------------------------------------------------------------
// Numerics against Redis 8.2.3 (values printed by the reference server)

#[test]
fn q8_embedding_matches_redis() {
    let mut h = Hnsw::new(3, Quant::Q8, 16, 1);
    let a = h.insert(&[1.0, 2.0, 3.0], 200);
    let e: Vec<f64> = h.embedding(a).into_iter().map(f64::from).collect();
    assert_eq!(e, vec![0.992125928401947, 2.007874011993408, 3.0]);
    let raw = h.raw(a);
    assert_eq!(raw.kind, "int8");
    assert_eq!(raw.data, vec![42u8, 85, 127]);
    assert_eq!(f64::from(raw.l2), 3.7416574954986572);
    assert_eq!(raw.range.map(f64::from), Some(0.8017836809158325));
}

#[test]
fn scores_match_redis_for_each_quant() {
    // VADD a=(1,2,3) b=(-1,0.5,2) c=(4,-2,0.25); VSIM VALUES 3 0.3 -1 2 WITHSCORES.
    // (quant, VSIM scores of a b c, VEMB b, VLINKS a scores of b c)
    type Case = (Quant, [f64; 3], [f64; 3], [f64; 3]);
    let cases: [Case; 3] = [
        (
            Quant::F32,
            [0.7546921372413635, 0.8095148205757141, 0.6830713152885437],
            [-1.0, 0.5, 2.0],
            [0.8499270677566528, 0.5223755836486816, 0.0],
        ),
        (
            Quant::Q8,
            [0.7531031370162964, 0.8090542554855347, 0.6846747994422913],
            [-0.992125928401947, 0.5039370059967041, 2.0],
            [0.851532518863678, 0.5201989412307739, 0.0],
        ),
        (Quant::Bin, [0.6666666567325592, 0.3333333134651184, 1.0], [-1.0, 1.0, 1.0], [0.0; 3]),
    ];
    for (quant, vsim, emb_b, links_a) in cases {
        let mut h = Hnsw::new(3, quant, 16, 1);
        let a = h.insert(&[1.0, 2.0, 3.0], 200);
        let b = h.insert(&[-1.0, 0.5, 2.0], 200);
        let c = h.insert(&[4.0, -2.0, 0.25], 200);
        let q = h.query(&[0.3, -1.0, 2.0]);
        let res = h.search(&q, 10, 0, None, 0);
        let score = |id| res.iter().find(|r| r.0 == id).unwrap().1;
        assert_eq!([score(a), score(b), score(c)], vsim, "{quant:?}");
        assert_eq!(h.search_exact(&q, 10, None), res, "{quant:?}");
        let emb: Vec<f64> = h.embedding(b).into_iter().map(f64::from).collect();
        assert_eq!(emb, emb_b.to_vec(), "{quant:?}");
        assert_eq!(f64::from(h.raw(b).l2), 2.291287899017334);
        if quant != Quant::Bin {
            // VLINKS a WITHSCORES: b then c (scores rounded to f32 as Redis does).
            let ls = |x| hnsw_link_score(&h, a, x);
            assert_eq!([ls(b), ls(c)], [links_a[0], links_a[1]], "{quant:?}");
        }
    }
}

#[test]
fn scores_match_redis_beyond_one_summation_block() {
    // Twenty components: two blocks of eight and a tail, so Redis's f32 summation order shows.
    let a = [
        0.0, 2.975, -0.767, -2.777, 1.482, 2.395, -2.1, -1.854, 2.577, 1.19, -2.884, -0.447, 2.999, -0.326,
        -2.915, 1.077, 2.638, -1.757, -2.185, 2.32,
    ];
    let b = [
        0.8, 0.422, -0.427, -1.104, -1.097, -0.411, 0.435, 0.8, 0.408, -0.444, -1.111, -1.089, -0.394, 0.448,
        0.799, 0.395, -0.46, -1.118, -1.081, -0.378,
    ];
    let q = [
        0.841, 0.98, 0.986, 0.858, 0.614, 0.287, -0.078, -0.434, -0.73, -0.928, -1.0, -0.937, -0.747, -0.456,
        -0.103, 0.264, 0.595, 0.845, 0.981, 0.985,
    ];
    for (quant, vsim, link, l2, range) in [
        (Quant::F32, [0.5219593346118927, 0.42152607440948486], 0.5455843210220337, 3.335859775543213, None),
        (
            Quant::Q8,
            [0.5218886733055115, 0.4214478135108948],
            0.5453282594680786,
            3.335859775543213,
            Some(0.3351459801197052),
        ),
    ] {
        let mut h = Hnsw::new(20, quant, 16, 1);
        let ia = h.insert(&a, 200);
        let ib = h.insert(&b, 200);
        let res = h.search(&h.query(&q), 10, 0, None, 0);
        assert_eq!(res, vec![(ia, vsim[0]), (ib, vsim[1])], "{quant:?}");
        assert_eq!(h.links(ia), vec![vec![(ib, link)]]);
        let raw = h.raw(ib);
        assert_eq!(f64::from(raw.l2), l2);
        assert_eq!(raw.range.map(f64::from), range);
    }
}

#[test]
fn f32_score_follows_redis_summation_order() {
    // A pair whose dot product differs in the last bit between Redis's blocked order
    // (0.5489024817943573, printed by Redis) and a left-to-right fold (0.5489025115966797).
    let parse =
        |s: &str| s.split_whitespace().map(|x| x.parse::<f64>().unwrap() as f32).collect::<Vec<f32>>();
    let a = parse(
        "0.791 -0.25199997 0.245 0.34500003 -0.668 0.25100005 0.617 0.75600004 -0.259 -0.845 -0.559 0.35800004 \
         -0.686 0.337 0.96099997 -0.06800002 -0.60800004 0.06700003 0.47800004 -0.24000001",
    );
    let q = parse(
        "-0.042999983 -0.735 -0.9 0.57500005 0.026000023 -0.79 0.923 0.16199994 -0.92 -0.120000005 -0.29299998 \
         0.91400003 0.45799994 0.011000037 -0.65 -0.035000026 -0.292 -0.375 -0.16900003 0.036000013",
    );
    let mut h = Hnsw::new(20, Quant::F32, 16, 1);
    let ia = h.insert(&a, 200);
    assert_eq!(h.search(&h.query(&q), 1, 0, None, 0), vec![(ia, 0.5489024817943573)]);
}

fn hnsw_link_score(h: &Hnsw, a: NodeId, b: NodeId) -> f64 {
    store::types::vset::hnsw::link_score_of_distance(h.node_distance(a, b))
}

#[test]
fn bin_link_scores_are_f32_rounded() {
    let mut h = Hnsw::new(3, Quant::Bin, 16, 1);
    let a = h.insert(&[1.0, 2.0, 3.0], 200);
    let b = h.insert(&[-1.0, 0.5, 2.0], 200);
    // One of three bits differs: distance 2/3, VLINKS prints 0.6666666269302368.
    assert_eq!(hnsw_link_score(&h, a, b), 0.6666666269302368);
    let l = h.links(a);
    assert!(l.iter().flatten().all(|&(x, s)| x == b && s == 0.6666666269302368));
}

#[test]
fn zero_vector_is_stored_unnormalized_with_norm_one() {
    for quant in QUANTS {
        let mut h = Hnsw::new(3, quant, 16, 1);
        let z = h.insert(&[0.0, 0.0, 0.0], 200);
        let one = h.insert(&[1.0, 0.0, 0.0], 200);
        let raw = h.raw(z);
        assert_eq!(raw.l2, 1.0);
        if quant == Quant::Bin {
            assert_eq!(h.embedding(z), vec![-1.0; 3]);
        } else {
            assert_eq!(h.embedding(z), vec![0.0; 3]);
            assert!(raw.data.iter().all(|&b| b == 0));
            // Redis: a zero vector is at distance 1 (score 0.5) from anything.
            assert_eq!(hnsw_link_score(&h, z, one), 0.5);
            let res = h.search(&h.query(&[0.0, 0.0, 0.0]), 10, 0, None, 0);
            assert!(res.iter().all(|r| r.1 == 0.5), "{quant:?} {res:?}");
        }
        assert_eq!(raw.range, if quant == Quant::Q8 { Some(0.0) } else { None });
    }
}

#[test]
fn overflowing_norm_gives_nan_like_redis() {
    // 1e20^2 overflows f32: Redis stores x/inf = 0 and VEMB prints 0 * inf = nan, l2 inf.
    let mut h = Hnsw::new(3, Quant::F32, 16, 1);
    let a = h.insert(&[1e20, 2e20, 3e20], 200);
    assert!(h.embedding(a).iter().all(|x| x.is_nan()));
    assert_eq!(h.raw(a).l2, f32::INFINITY);
}

#[test]
fn underflowing_q8_vector_quantizes_to_zero_like_redis() {
    // Squared norm underflows, so no normalization; 127/max overflows to inf and the x86 float
    // to int8 conversion of inf yields 0: VEMB RAW is [int8, "\0", 1, 2.600000111378358e-37].
    let mut h = Hnsw::new(1, Quant::Q8, 16, 1);
    let a = h.insert(&[2.6e-37], 200);
    let raw = h.raw(a);
    assert_eq!(raw.data, vec![0u8]);
    assert_eq!(raw.l2, 1.0);
    assert_eq!(raw.range.map(f64::from), Some(2.600000111378358e-37));
    assert_eq!(h.embedding(a), vec![0.0]);
}

#[test]
fn pathological_vectors_never_panic() {
    let specials = [0.0f32, -0.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1e-45, 3e38, -3e38, 1e20];
    for quant in QUANTS {
        for dim in [1usize, 3, 63, 64, 65, 130] {
            let mut h = Hnsw::new(dim, quant, 4, 1);
            let mut rng = SmallRng::seed_from_u64(dim as u64);
            for i in 0..60 {
                let v: Vec<f32> = (0..dim)
                    .map(|_| {
                        if rng.gen_bool(0.5) {
                            specials[rng.gen_range(0..specials.len())]
                        } else {
                            rng.gen_range(-1.0..1.0)
                        }
                    })
                    .collect();
                h.insert(&v, 50);
                let q = h.query(&v);
                let _ = h.search(&q, 5, 10, None, 0);
                if i % 3 == 0 {
                    let live: Vec<NodeId> = h.nodes().collect();
                    h.remove(live[rng.gen_range(0..live.len())]);
                }
            }
            assert_graph_consistent(&h);
            exercise(&mut h);
        }
    }
}

#[test]
fn quant_names_match_vinfo() {
    assert_eq!(Quant::F32.info_name(), "f32");
    assert_eq!(Quant::Q8.info_name(), "int8");
    assert_eq!(Quant::Bin.info_name(), "bin");
}

#[test]
fn quantization_error_is_bounded() {
    let vectors = random_vectors(300, 37, 11);
    for quant in QUANTS {
        let (h, ids) = build(quant, &vectors, 3);
        for (v, &id) in vectors.iter().zip(&ids) {
            let e = h.embedding(id);
            let raw = h.raw(id);
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((raw.l2 - norm).abs() <= norm * 1e-5);
            match quant {
                Quant::F32 => {
                    for (a, b) in v.iter().zip(&e) {
                        assert!((a - b).abs() <= 1e-5 * norm, "{a} {b}");
                    }
                }
                Quant::Q8 => {
                    // Half a quantization step (range/127 of the unit vector, times the norm).
                    let step = raw.range.unwrap() / 127.0 * raw.l2;
                    for (a, b) in v.iter().zip(&e) {
                        assert!((a - b).abs() <= step * 0.5 + 1e-5 * norm, "{a} {b} {step}");
                    }
                }
                Quant::Bin => {
                    for (a, b) in v.iter().zip(&e) {
                        assert_eq!(*a > 0.0, *b > 0.0);
                        assert_eq!(b.abs(), 1.0);
                    }
                }
            }
            assert_eq!(h.vector_bytes(id), h.vector_bytes(id));
        }
    }
}

#[test]
fn node_query_is_the_dequantized_vector_requeried() {
    let vectors = random_vectors(50, 20, 5);
    for quant in QUANTS {
        let (h, ids) = build(quant, &vectors, 3);
        for &id in &ids {
            let via_node = h.search_exact(&h.node_query(id), 5, None);
            let via_vec = h.search_exact(&h.query(&h.embedding(id)), 5, None);
            assert_eq!(via_node, via_vec);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Quality

#[test]
fn recall_per_quant() {
    let vectors = random_vectors(2000, 32, 42);
    let queries = random_vectors(200, 32, 43);
    for (quant, bound) in [(Quant::F32, 0.95), (Quant::Q8, 0.95), (Quant::Bin, 0.8)] {
        let (h, _) = build(quant, &vectors, 7);
        let r = recall(&h, &queries, 10, 200);
        println!("{quant:?}: recall@10 (ef 200) = {r:.4}");
        assert!(r >= bound, "{quant:?} recall {r}");
    }
}

fn mean_layer0_degree(h: &Hnsw) -> f64 {
    h.nodes().map(|id| h.links(id).last().unwrap().len()).sum::<usize>() as f64 / h.len() as f64
}

/// Points in 40 tight clusters: without the diversity rule the clusters end up poorly connected
/// to each other and recall plateaus (about 0.96 whatever the ef).
#[test]
fn recall_on_clustered_data() {
    let clustered = |n: usize, seed: u64| {
        let centers = random_vectors(40, 32, 99);
        let mut rng = SmallRng::seed_from_u64(seed);
        (0..n)
            .map(|_| {
                let c = &centers[rng.gen_range(0..40)];
                c.iter().map(|x| x + rng.gen_range(-0.08f32..0.08)).collect::<Vec<f32>>()
            })
            .collect::<Vec<_>>()
    };
    let (h, _) = build(Quant::F32, &clustered(3000, 1), 9);
    let r = recall(&h, &clustered(300, 2), 10, 50);
    println!("clustered recall@10 (ef 50) = {r:.4}");
    assert!(r >= 0.99, "{r}");
}

/// A point beside a tight cluster: the diversity rule accepts only one cluster member, so the
/// relaxed passes must supply the rest of its layer-0 links.
#[test]
fn outlier_next_to_a_tight_cluster_still_gets_links() {
    let mut rng = SmallRng::seed_from_u64(3);
    let mut h = Hnsw::new(8, Quant::F32, 16, 5);
    for _ in 0..300 {
        let mut v = vec![0f32; 8];
        v[0] = 1.0;
        for x in v.iter_mut().skip(1) {
            *x = rng.gen_range(-0.01..0.01);
        }
        h.insert(&v, 200);
    }
    let outlier = h.insert(&[0.5, 0.866, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], 200);
    let degree = h.links(outlier).last().unwrap().len();
    assert!(degree >= h.m() / 2, "outlier has {degree} layer-0 links");
    assert_graph_consistent(&h);
}

#[test]
fn removal_keeps_the_graph_consistent_and_navigable() {
    let vectors = random_vectors(2000, 32, 1);
    let queries = random_vectors(200, 32, 2);
    for quant in [Quant::F32, Quant::Q8] {
        let (mut h, ids) = build(quant, &vectors, 9);
        let degree_before = mean_layer0_degree(&h);
        let mut rng = SmallRng::seed_from_u64(4);
        let mut removed = Vec::new();
        for &id in &ids {
            if rng.gen_bool(0.5) {
                h.remove(id);
                removed.push(id);
            }
        }
        assert_eq!(h.len(), ids.len() - removed.len());
        for &id in &removed {
            assert!(!h.contains(id));
        }
        assert_graph_consistent(&h);
        // The orphans were re-linked: without repair the mean degree would halve.
        let degree_after = mean_layer0_degree(&h);
        assert!(degree_after >= degree_before * 0.9, "{degree_before} -> {degree_after}");
        let weak = h.nodes().filter(|&id| h.links(id).last().unwrap().len() < h.m() / 2).count();
        assert!(weak * 100 <= h.len(), "{weak} nodes left with fewer than M/2 links");
        let r = recall(&h, &queries, 10, 200);
        println!("{quant:?}: recall@10 after removing half = {r:.4}");
        assert!(r >= 0.95, "{quant:?} recall after removal {r}");
        // Searching for a live node's own vector finds the best match (itself or an equal).
        let found = h
            .nodes()
            .filter(|&id| {
                let q = h.node_query(id);
                h.search(&q, 1, 100, None, 0)[0].1 == h.search_exact(&q, 1, None)[0].1
            })
            .count();
        assert!(found as f64 >= h.len() as f64 * 0.99, "{found} of {}", h.len());
        // Removing again (or an unknown id) is a no-op.
        h.remove(removed[0]);
        h.remove(1_000_000);
        assert_eq!(h.len(), ids.len() - removed.len());
    }
}

#[test]
fn removing_everything_then_reinserting() {
    let vectors = random_vectors(300, 8, 3);
    let (mut h, ids) = build(Quant::Q8, &vectors, 1);
    for &id in ids.iter().rev().step_by(2) {
        h.remove(id);
    }
    assert_graph_consistent(&h);
    for &id in &ids {
        h.remove(id);
    }
    assert!(h.is_empty());
    assert_eq!(h.nodes().count(), 0);
    assert_eq!(h.max_level(), 0);
    assert!(h.search(&h.query(&vectors[0]), 5, 0, None, 0).is_empty());
    assert_eq!(h.random_node(&mut SmallRng::seed_from_u64(1)), None);
    // Ids restart dense from 0; the uid keeps counting every node ever created.
    assert_eq!(h.insert(&vectors[0], 200), 0);
    assert_eq!(h.insert(&vectors[1], 200), 1);
    assert_eq!(h.max_node_uid(), 302);
}

#[test]
fn ids_are_dense_and_reused_lowest_first() {
    let vectors = random_vectors(10, 4, 3);
    let (mut h, ids) = build(Quant::F32, &vectors, 1);
    assert_eq!(ids, (0..10).collect::<Vec<_>>());
    h.remove(7);
    h.remove(3);
    assert_eq!(h.insert(&vectors[0], 200), 3);
    assert_eq!(h.insert(&vectors[0], 200), 7);
    assert_eq!(h.insert(&vectors[0], 200), 10);
    assert_eq!(h.max_node_uid(), 13);
    assert_eq!(h.nodes().count(), 11);
}

#[test]
fn max_level_is_the_entry_points_level() {
    let vectors = random_vectors(500, 8, 3);
    let (mut h, ids) = build(Quant::Q8, &vectors, 1);
    let top = ids.iter().map(|&id| h.level(id)).max().unwrap();
    assert_eq!(h.max_level(), top);
    assert!((1..=16).contains(&top));
    // Level distribution: P(level >= 1) = 1/4.
    let above = ids.iter().filter(|&&id| h.level(id) >= 1).count();
    assert!((80..=170).contains(&above), "{above}");
    for &id in &ids {
        h.remove(id);
        if !h.is_empty() {
            let top = h.nodes().map(|id| h.level(id)).max().unwrap();
            assert!(h.max_level() <= top);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Filter

#[test]
fn rare_filter_without_bound_finds_every_match() {
    let vectors = random_vectors(2000, 16, 8);
    let queries = random_vectors(20, 16, 9);
    for quant in QUANTS {
        let (h, _) = build(quant, &vectors, 2);
        let matches = |id: NodeId| id % 61 == 5;
        let n_match = h.nodes().filter(|&id| matches(id)).count();
        for q in &queries {
            let q = h.query(q);
            let mut f1 = |id| matches(id);
            let mut f2 = |id| matches(id);
            let approx = h.search(&q, 100, 10, Some(&mut f1), 0);
            let exact = h.search_exact(&q, 100, Some(&mut f2));
            assert_eq!(exact.len(), n_match);
            assert_eq!(approx, exact, "{quant:?}");
        }
    }
}

#[test]
fn filter_returns_only_accepted_best_first() {
    let vectors = random_vectors(1000, 16, 8);
    let (h, _) = build(Quant::Q8, &vectors, 2);
    let q = h.query(&vectors[17]);
    let mut f = |id: NodeId| id.is_multiple_of(3);
    let res = h.search(&q, 10, 100, Some(&mut f), 0);
    assert_eq!(res.len(), 10);
    assert!(res.iter().all(|r| r.0 % 3 == 0));
    assert!(res.windows(2).all(|w| w[0].1 >= w[1].1));
    let mut f = |id: NodeId| id.is_multiple_of(3);
    let exact = h.search_exact(&q, 10, Some(&mut f));
    let hits = res.iter().filter(|r| exact.contains(r)).count();
    assert!(hits >= 9, "{hits}");
}

#[test]
fn filter_ef_bounds_the_exploration() {
    let vectors = random_vectors(2000, 16, 8);
    let (h, _) = build(Quant::F32, &vectors, 2);
    let q = h.query(&vectors[3]);
    for bound in [1usize, 5, 50] {
        let mut calls = 0usize;
        let mut f = |_id: NodeId| {
            calls += 1;
            false
        };
        let res = h.search(&q, 10, 100, Some(&mut f), bound);
        assert!(res.is_empty());
        // The entry plus the neighbours of at most `bound - 1` expanded nodes (32 links each).
        assert!(calls <= 1 + (bound - 1) * 32, "{bound}: {calls}");
    }
    let mut calls = 0usize;
    let mut f = |_id: NodeId| {
        calls += 1;
        false
    };
    h.search(&q, 10, 100, Some(&mut f), 0);
    assert!(calls > 1900, "unbounded search should reach nearly everything: {calls}");
}

#[test]
fn search_respects_k_and_ef_defaults() {
    let vectors = random_vectors(500, 8, 8);
    let (h, _) = build(Quant::Q8, &vectors, 2);
    let q = h.query(&vectors[0]);
    assert_eq!(h.search(&q, 10, 0, None, 0).len(), 10);
    // k above ef: the search widens to k.
    assert_eq!(h.search(&q, 300, 5, None, 0).len(), 300);
    assert_eq!(h.search(&q, 1000, 0, None, 0).len(), 500);
    assert!(h.search(&q, 0, 0, None, 0).is_empty());
    assert_eq!(h.search_exact(&q, 1000, None).len(), 500);
    let r = h.search(&q, 50, 200, None, 0);
    assert!(r.windows(2).all(|w| w[0].1 >= w[1].1));
}

// ---------------------------------------------------------------------------------------------
// Determinism and snapshots

fn churn(h: &mut Hnsw, vectors: &[Vec<f32>], seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    for v in vectors {
        h.insert(v, 100);
        if rng.gen_bool(0.3) {
            let live: Vec<NodeId> = h.nodes().collect();
            h.remove(live[rng.gen_range(0..live.len())]);
        }
    }
}

#[test]
fn same_operations_give_identical_graphs() {
    let vectors = random_vectors(800, 12, 21);
    for quant in QUANTS {
        let mut a = Hnsw::new(12, quant, 8, 77);
        let mut b = Hnsw::new(12, quant, 8, 77);
        churn(&mut a, &vectors, 5);
        churn(&mut b, &vectors, 5);
        assert_eq!(encoded(&a), encoded(&b));
        let c = a.clone();
        assert_eq!(encoded(&a), encoded(&c));
    }
}

#[test]
fn snapshot_round_trip_answers_and_continues_identically() {
    let vectors = random_vectors(1200, 24, 31);
    let queries = random_vectors(30, 24, 32);
    for quant in QUANTS {
        let mut a = Hnsw::new(24, quant, 12, 3);
        churn(&mut a, &vectors[..800], 6);
        let bytes = encoded(&a);
        let mut b = Hnsw::decode(&bytes).unwrap();
        assert_eq!(encoded(&b), bytes);
        assert_eq!((b.len(), b.dim(), b.quant(), b.m()), (a.len(), a.dim(), a.quant(), a.m()));
        assert_eq!((b.max_level(), b.max_node_uid()), (a.max_level(), a.max_node_uid()));
        for q in &queries {
            let (qa, qb) = (a.query(q), b.query(q));
            assert_eq!(a.search(&qa, 10, 50, None, 0), b.search(&qb, 10, 50, None, 0));
        }
        for id in a.nodes() {
            assert_eq!(a.links(id), b.links(id));
            assert_eq!(a.raw(id), b.raw(id));
        }
        churn(&mut a, &vectors[800..], 7);
        churn(&mut b, &vectors[800..], 7);
        assert_eq!(encoded(&a), encoded(&b));
    }
}

#[test]
fn empty_index_round_trips() {
    let h = Hnsw::new(5, Quant::Bin, 0, 1);
    assert_eq!(h.m(), 16);
    let b = Hnsw::decode(&encoded(&h)).unwrap();
    assert!(b.is_empty());
    assert_eq!(encoded(&b), encoded(&h));
}

#[test]
fn decode_rejects_inconsistent_graphs() {
    let vectors = random_vectors(40, 4, 1);
    let (h, _) = build(Quant::F32, &vectors, 1);
    let bytes = encoded(&h);
    assert!(Hnsw::decode(&bytes[..bytes.len() - 1]).is_err());
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(Hnsw::decode(&longer).is_err());
    assert!(Hnsw::decode(&[]).is_err());
    // Wrong version byte.
    let mut v = bytes.clone();
    v[0] = 9;
    assert!(Hnsw::decode(&v).is_err());
}

fn exercise(h: &mut Hnsw) {
    let dim = h.dim();
    let q = h.query(&vec![0.5; dim]);
    let _ = h.search(&q, 5, 10, None, 0);
    let mut f = |id: NodeId| id.is_multiple_of(2);
    let _ = h.search(&q, 5, 10, Some(&mut f), 3);
    let _ = h.search_exact(&q, 5, None);
    let ids: Vec<NodeId> = h.nodes().collect();
    for &id in ids.iter().take(5) {
        let _ = (h.embedding(id), h.raw(id), h.links(id), h.level(id), h.vector_bytes(id));
        let _ = h.search(&h.node_query(id), 3, 10, None, 0);
    }
    let _ = h.random_node(&mut SmallRng::seed_from_u64(1));
    let _ = h.heap_bytes();
    for i in 0..3 {
        h.insert(&vec![i as f32 - 1.0; dim], 20);
    }
    for &id in ids.iter().take(4) {
        h.remove(id);
    }
    let mut out = Vec::new();
    h.encode(&mut out);
    assert!(Hnsw::decode(&out).is_ok());
}

fn corpus() -> Vec<Vec<u8>> {
    QUANTS
        .iter()
        .map(|&quant| {
            let vectors = random_vectors(30, 5, 2);
            let mut h = Hnsw::new(5, quant, 4, 9);
            churn(&mut h, &vectors, 3);
            encoded(&h)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 600, ..ProptestConfig::default() })]

    #[test]
    fn decode_of_mutated_bytes_never_panics(
        which in 0usize..3,
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in proptest::option::of(any::<prop::sample::Index>()),
    ) {
        let mut bytes = corpus()[which].clone();
        for (at, val) in edits {
            let i = at.index(bytes.len());
            bytes[i] = val;
        }
        if let Some(cut) = cut {
            bytes.truncate(cut.index(bytes.len()));
        }
        if let Ok(mut h) = Hnsw::decode(&bytes) {
            exercise(&mut h);
        }
    }

    #[test]
    fn decode_of_random_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        if let Ok(mut h) = Hnsw::decode(&bytes) {
            exercise(&mut h);
        }
    }
}

#[test]
fn decode_survives_every_single_byte_mutation() {
    for bytes in corpus() {
        for i in 0..bytes.len() {
            for val in [0u8, 1, 0x7f, 0x80, 0xff, bytes[i] ^ 1] {
                let mut b = bytes.clone();
                b[i] = val;
                if let Ok(mut h) = Hnsw::decode(&b) {
                    exercise(&mut h);
                }
            }
            if let Ok(mut h) = Hnsw::decode(&bytes[..i]) {
                exercise(&mut h);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Projection

#[test]
fn projection_is_deterministic_and_shaped() {
    let p = Projection::new(100, 20, 1);
    assert_eq!((p.input_dim(), p.output_dim()), (100, 20));
    assert_eq!(p, Projection::new(100, 20, 1));
    let v: Vec<f32> = (0..100).map(|i| (i as f32).sin()).collect();
    let out = p.apply(&v);
    assert_eq!(out.len(), 20);
    assert_eq!(out, Projection::new(100, 20, 1).apply(&v));
    // Redis's VADD REDUCE 2 VALUES 4 1 2 3 4: Hadamard rows scaled by 1/sqrt(4).
    assert_eq!(Projection::new(4, 2, 0).apply(&[1.0, 2.0, 3.0, 4.0]), vec![5.0, -1.0]);
    assert!(p.heap_bytes() >= 100 * 20 * 4);
}

#[test]
fn projection_rows_are_orthonormal_for_power_of_two_inputs() {
    let p = Projection::new(64, 64, 0);
    let rows: Vec<Vec<f32>> = (0..64)
        .map(|i| {
            let mut e = vec![0.0; 64];
            e[i] = 1.0;
            p.apply(&e)
        })
        .collect();
    // Column i of the matrix is rows[i]; the Hadamard matrix is symmetric and orthogonal.
    for i in 0..64 {
        for j in 0..64 {
            let d: f32 = rows[i].iter().zip(&rows[j]).map(|(a, b)| a * b).sum();
            let want = if i == j { 1.0 } else { 0.0 };
            assert!((d - want).abs() < 1e-5, "{i} {j} {d}");
        }
    }
}

#[test]
fn projection_round_trips_and_rejects_garbage() {
    let p = Projection::new(30, 7, 5);
    let mut out = Vec::new();
    p.encode(&mut out);
    assert_eq!(Projection::decode(&out).unwrap(), p);
    assert!(Projection::decode(&out[..out.len() - 1]).is_err());
    assert!(Projection::decode(&[]).is_err());
    let mut bad = out.clone();
    bad[4] = 31; // output dim above input dim
    assert!(Projection::decode(&bad).is_err());
    let mut zero = out.clone();
    zero[0] = 0;
    assert!(Projection::decode(&zero).is_err());
}

#[test]
fn random_node_is_live_and_covers_the_set() {
    let vectors = random_vectors(50, 4, 3);
    let (mut h, ids) = build(Quant::Q8, &vectors, 1);
    for &id in ids.iter().filter(|&&id| id % 2 == 1) {
        h.remove(id);
    }
    let mut rng = SmallRng::seed_from_u64(9);
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..2000 {
        let id = h.random_node(&mut rng).unwrap();
        assert!(h.contains(id));
        seen.insert(id);
    }
    assert_eq!(seen.len(), h.len());
}

#[test]
fn heap_bytes_grows_with_content() {
    let vectors = random_vectors(1000, 64, 3);
    let small = build(Quant::F32, &vectors[..10], 1).0.heap_bytes();
    let (mut big, ids) = build(Quant::F32, &vectors, 1);
    let before = big.heap_bytes();
    assert!(before > small);
    assert!(before >= 1000 * 64 * 4);
    for &id in &ids[..900] {
        big.remove(id);
    }
    assert!(big.heap_bytes() < before);
}

#[test]
fn hnsw_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Hnsw>();
}
