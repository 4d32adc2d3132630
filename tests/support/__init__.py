"""What the tests share: fixtures' builders, mail and corpora, engines' proxies, waiting, and
the loads some tests drive. One package, so a helper is found in one place."""
