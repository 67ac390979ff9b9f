-- Schema version 3: proposable tags (see the file schema's version 8): a tag an operator may
-- be asked to approve a proposed write of.

ALTER TABLE Tags ADD COLUMN Proposable INTEGER NOT NULL DEFAULT 0 CHECK (Proposable IN (0, 1));
