def shout(word, times):
    out = []
    for _ in range(times):
        out.append(word.upper())
    return " ".join(out)
