-- acpdb index schema: files by layer. `index_summary.layers` counts the distinct layers after
-- every import; through this index a delta import counts them without reading every file row.
CREATE INDEX files_layer ON files(layer) WHERE layer IS NOT NULL;
