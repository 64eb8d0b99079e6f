-- model_router60.lua: a layer whose 60 inputs are not a multiple of 8
-- (a router's width): 16-bit transposes of 60 rows are not MN-major tiles
-- TMA can load (rows of 120 bytes), so those GEMMs stay on mma.sync.
model "router60"
linear("router", 60, 256)
