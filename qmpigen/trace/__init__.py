"""`qmpigen trace`: merge the per-rank files of sample_tools/trace.c (docs/trace-format.md).

The stages, one module each: read (streaming, validating rank files), match (requests and
messages), otf2_out (OTF2 archive), perfetto (Chrome trace JSON), timeline (PNG and text
summary); merge runs them and is what the CLI calls.
"""
