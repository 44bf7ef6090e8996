"""Text as a person sees it: Unicode look-alikes (`unicode`), terminal escapes (`escapes`), a
row's words (`rows`)."""
