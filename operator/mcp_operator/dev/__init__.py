"""Local development: a real control plane on loopback (``cluster``) and the demo (``demo``)."""
