from medrewardbench.utils.shorten import middle_ellipsis, shorten_distinct


def test_middle_ellipsis_keeps_the_start_and_the_end() -> None:
    assert middle_ellipsis("short", 10) == "short"
    cut = middle_ellipsis("api:Qwen/Qwen2.5-VL-72B-Instruct-AWQ", 20)
    assert len(cut) == 20 and cut.startswith("api:Qwen") and cut.endswith("ct-AWQ") and "…" in cut


def test_shorten_distinct_never_makes_two_names_alike() -> None:
    names = ["api:tiny-qwen @127.0.0.1:18001-and-more", "api:tiny-qwen @127.0.0.1:18002-and-more"]
    short = shorten_distinct(names, 12)
    assert len(set(short)) == 2 and all(len(s) <= len(n) for s, n in zip(short, names, strict=True))
    same_end = ["api:model-one-" + "x" * 30, "api:model-two-" + "x" * 30]
    assert len(set(shorten_distinct(same_end, 10))) == 2, "widened until the differing part shows"
