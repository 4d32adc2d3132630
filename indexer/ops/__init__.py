"""Operations: reconcile the indexes with the table, purge a mailbox (CLI in ``ops_cmds``)."""
