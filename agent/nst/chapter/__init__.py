"""One chapter of NstAgent: the loop and its tools, the prompt, drafting under the gate, the state
update, its sizing."""
