"""``engine.registry.NamedRegistry``: what a run reads of a registry."""

from __future__ import annotations

from engine.assembly.stages import StageRegistry


def test_pick_gives_the_registered_names_in_the_order_asked() -> None:
    """``pick`` (the stages a template names, for a run's context): unknown names are left out, order is the caller's."""
    reg = StageRegistry()

    def a(*_: object) -> list:
        return []

    def b(*_: object) -> list:
        return []

    reg.register("a", a)
    cleanup = reg.register("b", b)
    assert reg.pick(["b", "missing", "a", "b"]) == (("b", b), ("a", a), ("b", b))
    assert reg.pick(iter(["a"])) == (("a", a),) and reg.pick([]) == ()
    cleanup()
    assert reg.pick(["b", "a"]) == (("a", a),)
