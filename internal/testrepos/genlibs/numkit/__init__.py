"""numkit: number theory and small statistics."""
from .theory import gcd, is_prime, primes_upto, factorize
from .stats import mean, median, variance
