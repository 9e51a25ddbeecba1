-- acpdb index schema: symbols by size, largest first, the order in which `acp_unused` lists the
-- symbols nothing calls (a symbol without lines comes last). It also holds what its first rules
-- read (exported, type) and the lines its order is made of, so that the symbols those rules
-- leave out are never read from the table.
CREATE INDEX symbols_size
    ON symbols(coalesce(line_end - line_start, -1) DESC, id, exported, type, line_start, line_end);
