-- acpdb index schema: symbols by size, largest first, the order in which `acp_unused` lists the
-- symbols nothing calls (a symbol without lines comes last).
CREATE INDEX symbols_size ON symbols(coalesce(line_end - line_start, -1) DESC, id);
