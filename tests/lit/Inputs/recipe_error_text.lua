recipe "error_text" { format = e4m3, scaling = current }
-- a position written into a message is text, even one in this file
error("recipe_error_text.lua:99: /etc/shadow:4: boom", 0)
