"""The demo notebook here is opened by the browser test, not run by nbval (it has no stored outputs)."""

collect_ignore_glob = ["*.ipynb"]
