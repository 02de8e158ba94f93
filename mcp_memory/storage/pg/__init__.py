"""The PostgreSQL backend (issue 16, ADR 19 and 20): the schema and its migrations, the translation of
the shared storage SQL, the keyword index, the connections and the store."""
