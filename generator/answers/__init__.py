"""The answers stage, torch-free, beside measure and diff: what a "will it fit?" answer is made of, declared once
and read by predict (which simulates) and report (which places the answers on the pages).

- ``setups``: the set-ups people ask about, each with the row that answers it and its precision and recipe."""
