module mcp-operator.dev/stdio-exec

go 1.22
