-- acpdb index schema, part 3 of 6: the index of call-graph nodes by the symbol they resolve to.
-- The importer resolves every node (which reads the name indexes of V14) before applying this,
-- so that the index is built once over the final values instead of updated row by row.
CREATE INDEX graph_nodes_symbol ON graph_nodes(symbol_id);
