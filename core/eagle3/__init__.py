"""EAGLE-3 heads: a decoder layer (or a few) that drafts from the target's own hidden states.

Entry point: drafter.py (EagleDrafter, the head behind the drafter contract). Then:

    head.py       the head in SafeAILab/EAGLE's layout (fc, midlayer, norm, lm_head, d2t)
    layers.py     the pieces it is built from
    loading.py    read a head in any published layout, write it in SafeAILab's (head_for, load_head)
    dialects.py   which publisher's config.json this is, read into our config; keys.py: every key accounted for
    tensors.py    published tensor names -> ours
    head_info.py  what a loaded head is, as plain data
    readout.py    does this head fit this target? acceptance by draft position, taps, vocabulary coverage
    int8_scores.py  the LM head's scores in int8 on a CPU (head_int8): cheaper drafts, the same output
    fused_head.py   a plain head's layer as stacked products for drafting: the modules' states, fewer ops
"""
