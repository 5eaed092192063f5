# An attempt at the capstone (notebook 09), run after its cell in the same namespace: 128 persistent CTAs.
#
# The capstone launches as many 2-CTA clusters as can be resident, one CTA per SM: 66 clusters on a 132-SM H100
# or H200. Each cluster works on items of two 128x256 tiles (256x256 of D), in grouped order. With 66 clusters the
# items never make whole waves at the sizes the course times:
#   4096³:   256 items = 3.88 waves of 66 (the 4th wave runs 58 clusters while 8 wait for the end);
#   6144³:   576 items = 8.73 waves (from 8 full waves on, the capstone cuts the last one along K: stream-K);
#   8192³: 1,024 items = 15.52 waves (stream-K again).
# With 64 clusters (128 CTAs) they do: 4, 9 and 16 waves exactly, so no stream-K build runs and every cluster
# does the same work (fast.cu's kernel 12 runs 128 CTAs too: 512 tiles of 128x256 make exactly 4 waves at 4096³).
# The busiest cluster does 4 items at 4096³ either way, so the tile count alone promises nothing there; what it
# can buy: every wave starts together on the grouped order's boundaries (64 clusters sweep 8 cluster rows x 8
# columns of one group), the power of 4 idle SMs goes to the other 128 under the power cap, and at 6144³ and
# 8192³ no partial tiles travel through the stream-K workspace. What it costs: 4 of 132 SMs idle (3 %).
#
# Measured: not yet (issue 50 asks for it on the H200; benchmarks/solutions.py runs it as the row
# "capstone_128_ctas", next to the capstone in the same run, under both timing methods).

CAPSTONE_DESCRIPTION = CAPSTONE_DESCRIPTION + "; 128 persistent CTAs (64 clusters): whole waves at 4096³-8192³"

PERSISTENT_CLUSTERS = 64
if CAP_MAX_CLUSTERS < PERSISTENT_CLUSTERS:
    raise LookupError(f"capstone_128_ctas: this GPU keeps only {CAP_MAX_CLUSTERS} clusters of {CAP_CLUSTER} resident, "
                      f"fewer than the {PERSISTENT_CLUSTERS} the attempt launches")
CAP_MAX_CLUSTERS = PERSISTENT_CLUSTERS
