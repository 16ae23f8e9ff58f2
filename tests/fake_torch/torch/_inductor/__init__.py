"""Fake torch._inductor: real torch imports this package before codecache."""
