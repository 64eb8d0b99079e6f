-- dofile would read any file
dofile("/etc/passwd")
