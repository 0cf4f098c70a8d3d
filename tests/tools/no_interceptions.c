/* Not a QMPI tool: a shared library without get_interceptions. */
int not_a_tool(void);
int not_a_tool(void) { return 0; }
